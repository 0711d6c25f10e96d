"""An authenticated control plane (issue 27, finding 2), on both real brokers.

The attacker holds a certificate of the run's CA (the adversary's, a registered node the threat
model calls malicious, or a client shard's) and uses a plain MQTT client, not privrec's. It
tries what the hostile probe did: a retained forged phase announcement, reading the observation
feed, and writing another node's status. The brokers refuse by certificate (amqtt through its
plugin system, Mosquitto through the ACL file `privrec certs` writes), and every node verifies
the orchestrator's signature on a phase before it believes it.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import aiomqtt
import pytest

from privrec.shared.control import ControlPlane, ControlPlaneError
from privrec.shared.control.announcements import encode, sign
from privrec.shared.identity import NodeIdentity
from privrec.shared.tls import client_ssl_context, make_certs
from privrec.sim.broker import EmbeddedBroker
from tests.conftest import HOST, _mosquitto_binary, _wait_listening, free_port, mosquitto_tls_conf

pytestmark = pytest.mark.broker

NODES = ["sim", "operator", "adversary", "shard-0", "shard-1"]
WAIT_S = 1.5  # how long a subscriber waits for a message that must not come


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_certs(tmp_path_factory.mktemp("tls"), NODES)


@pytest.fixture(scope="module")
def amqtt_acl(certs: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("amqtt-acl") / "broker.log"
    with EmbeddedBroker(HOST, log_file=log, tls_dir=certs) as broker:
        yield broker.url


@pytest.fixture(scope="module")
def mosquitto_acl(certs: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    binary = _mosquitto_binary()
    if binary is None:
        pytest.skip("mosquitto binary not found (apt-get install mosquitto); CI installs it")
    work = tmp_path_factory.mktemp("mosq-acl")
    port = free_port(HOST)
    conf = work / "mosquitto.conf"
    conf.write_text(mosquitto_tls_conf(certs, port))
    log = (work / "mosquitto.log").open("ab")
    proc = subprocess.Popen([binary, "-c", str(conf)], stdout=log, stderr=log)
    try:
        if not _wait_listening(HOST, port, proc, timeout=5.0):
            pytest.fail(f"mosquitto (ACL) did not start; see {work / 'mosquitto.log'}")
        yield f"mqtts://{HOST}:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=5)
        log.close()


BROKERS = ["amqtt_acl", "mosquitto_acl"]


def raw_client(url: str, certs: Path, node: str) -> aiomqtt.Client:
    """A plain MQTT client presenting `node`'s certificate (what an attacker would use)."""
    port = int(url.rsplit(":", 1)[1])
    return aiomqtt.Client(
        HOST,
        port,
        identifier=f"raw-{node}-{time.monotonic_ns()}",
        tls_context=client_ssl_context(certs, node),
    )


async def received(client: aiomqtt.Client, seconds: float = WAIT_S) -> list[tuple[str, bytes]]:
    out: list[tuple[str, bytes]] = []
    try:
        async with asyncio.timeout(seconds):
            async for message in client.messages:
                out.append((message.topic.value, bytes(message.payload)))  # type: ignore[arg-type]
    except TimeoutError:
        pass
    return out


def run_of(test: str) -> str:
    return f"{test}-{time.monotonic_ns()}"


@pytest.mark.parametrize("broker", BROKERS)
async def test_a_client_node_cannot_announce_a_phase(
    broker: str, certs: Path, request: pytest.FixtureRequest
) -> None:
    """Regression: #27 (2) the adversary's certificate published a retained phase "serve" and
    every shard believed it. Now the broker drops it: the retained phase stays the
    orchestrator's."""
    url, run = request.getfixturevalue(broker), run_of("forge")
    topic = f"privrec/{run}/phase"
    forged = encode({"phase": "serve", "seq": 1000, "ts": time.time(), "node": "sim"})
    async with ControlPlane(url, run_id=run, node="sim", tls_dir=certs) as sim:
        await sim.announce_phase("enroll")
        async with raw_client(url, certs, "adversary") as attacker:
            await attacker.publish(topic, forged, qos=1, retain=True)
        async with raw_client(url, certs, "shard-0") as late:
            await late.subscribe(topic, qos=1)
            got = await received(late)
    assert [json.loads(p)["phase"] for _, p in got] == ["enroll"]


@pytest.mark.parametrize("broker", BROKERS)
@pytest.mark.parametrize("topic_filter", ["privrec/{run}/observations", "privrec/+/#", "#"])
async def test_the_feed_is_read_only_by_the_adversary_and_the_orchestrator(
    broker: str, certs: Path, request: pytest.FixtureRequest, topic_filter: str
) -> None:
    """Regression: #27 (2) any client node could read every user's releases and queries on the
    observation feed. A shard's certificate gets nothing from it, whatever filter it asks
    for; the adversary's and the orchestrator's get every record."""
    url, run = request.getfixturevalue(broker), run_of("feed")
    async with (
        ControlPlane(url, run_id=run, node="server", tls_dir=certs) as server,
        ControlPlane(url, run_id=run, node="adversary", tls_dir=certs) as adversary,
        ControlPlane(url, run_id=run, node="sim", tls_dir=certs) as sim,
        raw_client(url, certs, "shard-0") as eve,
    ):
        readers = [
            await adversary.observations().subscribed(),
            await sim.observations().subscribed(),
        ]
        await eve.subscribe(topic_filter.format(run=run), qos=1)
        await server.publish_observation(b"a user's release")
        for feed in readers:
            assert await asyncio.wait_for(feed.__anext__(), 10) == b"a user's release"
        assert not [t for t, _ in await received(eve) if t.endswith("/observations")]


@pytest.mark.parametrize("broker", BROKERS)
async def test_a_refused_subscription_is_an_error_not_silence(
    broker: str, certs: Path, request: pytest.FixtureRequest
) -> None:
    """On amqtt a shard's subscription to the feed is refused at once (SUBACK failure), which
    the control plane raises; Mosquitto grants it and delivers nothing (the test above)."""
    url = request.getfixturevalue(broker)
    async with ControlPlane(url, run_id=run_of("sub"), node="shard-0", tls_dir=certs) as shard:
        feed = shard.observations()
        if broker == "amqtt_acl":
            with pytest.raises(ControlPlaneError, match="refused by the broker"):
                await feed.subscribed()
        else:
            await feed.subscribed()


@pytest.mark.parametrize("broker", BROKERS)
async def test_a_client_node_writes_only_its_own_status(
    broker: str, certs: Path, request: pytest.FixtureRequest
) -> None:
    """shard-0 cannot declare shard-1 lost (its status topic is shard-1's alone)."""
    url, run = request.getfixturevalue(broker), run_of("status")
    async with ControlPlane(url, run_id=run, node="shard-1", tls_dir=certs):
        async with raw_client(url, certs, "shard-0") as attacker:
            fake = encode({"node": "shard-1", "state": "offline", "reason": "lost"})
            await attacker.publish(f"privrec/{run}/nodes/shard-1/status", fake, qos=1, retain=True)
        async with ControlPlane(url, run_id=run, node="sim", tls_dir=certs) as sim:
            statuses = sim.node_statuses()
            seen: list[tuple[str, str]] = []
            with pytest.raises(TimeoutError):
                while True:
                    node, status = await asyncio.wait_for(statuses.__anext__(), WAIT_S)
                    seen.append((node, status["state"]))
    assert ("shard-1", "online") in seen
    assert [s for s in seen if s[0] == "shard-1"] == [("shard-1", "online")]


# ------------------------------------------------------------------ signatures


async def test_nodes_believe_only_phases_signed_by_the_runs_control_key(
    amqtt_url: str,
) -> None:
    """On a broker that lets anyone publish (amqtt without TLS), a verifying node drops an
    unsigned announcement, one signed by another key, one signed for another run, and an
    older one replayed; it believes the orchestrator's."""
    run, other_run = run_of("signed"), run_of("other")
    orchestrator, stranger = NodeIdentity.generate("sim"), NodeIdentity.generate("sim")
    keys = {"sim": orchestrator.public_key()}
    topic = f"privrec/{run}/phase"

    def body(phase: str, seq: int) -> dict:
        return {"phase": phase, "seq": seq, "ts": time.time(), "node": "sim"}

    async with (
        ControlPlane(amqtt_url, run_id=run, node="sim", signer=orchestrator) as sim,
        ControlPlane(amqtt_url, run_id=run, node="shard-0", control_keys=keys) as shard,
        aiomqtt.Client(HOST, int(amqtt_url.rsplit(":", 1)[1])) as attacker,
    ):
        phases = shard.phases()
        await sim.announce_phase("enroll")
        assert (await asyncio.wait_for(phases.__anext__(), 10)).name == "enroll"
        replay = sign(orchestrator, topic, body("enroll", 1))
        for forged in (
            body("serve", 1000),  # unsigned
            sign(stranger, topic, body("serve", 1001)),  # another key
            sign(orchestrator, f"privrec/{other_run}/phase", body("serve", 1002)),  # other run
            {**sign(orchestrator, topic, body("collect", 2)), "phase": "serve"},  # altered
            replay,  # the orchestrator's own, older
        ):
            await attacker.publish(topic, encode(forged), qos=1, retain=True)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(phases.__anext__(), WAIT_S)
        await sim.announce_phase("collect")
        got = await asyncio.wait_for(phases.__anext__(), 10)
        assert (got.name, got.seq, got.node) == ("collect", 2, "sim")


def test_a_control_key_signs_only_as_its_own_node() -> None:
    """The constructor refuses a signer that is not the node itself."""
    with pytest.raises(Exception, match="cannot sign as node"):
        ControlPlane(
            "mqtt://127.0.0.1:1", run_id="r", node="sim", signer=NodeIdentity.generate("x")
        )


# ------------------------------------------------------------------ a whole run


def sim_command(out: Path, url: str, tls: Path, config: Path) -> list[str]:
    return [
        sys.executable, "-m", "privrec", "sim", "--config", str(config), "--out", str(out),
        "--mqtt", url, "--tls-dir", str(tls),
    ]  # fmt: skip


RUN = """
[run]
name = "forged"
seed = 1
[data]
dataset = "synthetic"
synthetic_users = 200
synthetic_items = 150
[population]
shards = 2
batch_size = 32
[model]
k = 10
[adversary]
attacks = ["rpt_fake_detection"]
"""


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("broker", BROKERS)
def test_a_forged_phase_before_the_shards_start_does_not_stop_the_run(
    broker: str, certs: Path, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Regression: #27 (2) with the adversary's certificate, a retained forged "serve" on the
    run's phase topic: the shards skipped their releases and exited 2 (this very test, on the
    code before the fix: "shard 1/2 joined after collection; not submitting", `privrec sim`
    exit 2). Meanwhile a shard's certificate listened to everything: it must have heard no
    observation."""
    url = request.getfixturevalue(broker)
    topic = "privrec/forged-s1/phase"
    config = tmp_path / "run.toml"
    config.write_text(RUN)

    async def forge_and_listen(sim: subprocess.Popen[bytes]) -> list[str]:
        """Re-publish the forged retained phase every 50 ms for the whole run (on the old code
        the first shard to subscribe after one took "serve" for the current phase, and the
        orchestrator's lower seqs were then dropped), while a shard's certificate listens."""
        heard: list[str] = []
        async with (
            raw_client(url, certs, "adversary") as attacker,
            raw_client(url, certs, "shard-1") as eve,
        ):
            await eve.subscribe(topic, qos=1)  # granted: phases are public
            await eve.subscribe("#", qos=1)  # amqtt refuses it, Mosquitto filters it
            while sim.poll() is None:
                forged = {"phase": "serve", "seq": 1000, "ts": time.time(), "node": "sim"}
                await attacker.publish(topic, encode(forged), qos=1, retain=True)
                heard += [t for t, _ in await received(eve, 0.05)]
        return heard

    with (tmp_path / "sim.log").open("wb") as log:
        sim = subprocess.Popen(
            sim_command(tmp_path / "run", url, certs, config), stdout=log, stderr=subprocess.STDOUT
        )
        heard = asyncio.run(forge_and_listen(sim))
    assert sim.wait() == 0, (tmp_path / "sim.log").read_text()[-3000:]
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert report["population"]["profiles"] == 200
    assert not [t for t in heard if t.endswith("/observations")]
    assert any(t.endswith("/phase") for t in heard)
