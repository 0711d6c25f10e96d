"""Integration tests of `shared.control.ControlPlane` against real brokers.

Every broker test runs twice: against the embedded amqtt broker process (`sim.broker`) and
against a Mosquitto process started on a free loopback port (skipped when the `mosquitto` binary
is missing; CI installs Debian's package). Each test uses its own run id, so tests sharing a
module-scoped broker never see each other's retained messages.
"""

from __future__ import annotations

import asyncio
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TypeVar

import aiomqtt
import pytest

from privrec.shared.control import (
    PHASES,
    ControlPlane,
    ControlPlaneError,
    Phase,
    parse_mqtt_url,
    topic_for,
)
from privrec.shared.errors import ConfigError
from tests.conftest import free_port

pytestmark = [pytest.mark.broker, pytest.mark.timeout(60)]

HOST = os.environ.get("PRIVREC_TEST_MQTT_HOST", "127.0.0.1")
STEP_TIMEOUT = 10.0  # seconds for any single expected message; brokers answer in milliseconds

T = TypeVar("T")


# --------------------------------------------------------------------------- brokers


@pytest.fixture(
    params=["amqtt", pytest.param("mosquitto", marks=pytest.mark.mosquitto)],
)
def broker_url(request: pytest.FixtureRequest) -> str:
    """URL of a running broker: the embedded amqtt process or Mosquitto."""
    return str(request.getfixturevalue(f"{request.param}_url"))


@pytest.fixture
def run_id(request: pytest.FixtureRequest) -> str:
    """A run id (one topic level) unique to this test invocation."""
    name = re.sub(r"[^A-Za-z0-9_-]", "_", request.node.name)
    return f"{secrets.token_hex(4)}-{name}"


# --------------------------------------------------------------------------- helpers


async def _first(feed: AsyncIterator[T], pred: Callable[[T], bool]) -> T:
    """Return the first item of `feed` that satisfies `pred`, within STEP_TIMEOUT."""
    async with asyncio.timeout(STEP_TIMEOUT):
        async for item in feed:
            if pred(item):
                return item
    msg = "feed ended"
    raise AssertionError(msg)


def _is(node: str, **expected: Any) -> Callable[[tuple[str, dict[str, Any]]], bool]:
    def pred(item: tuple[str, dict[str, Any]]) -> bool:
        name, status = item
        return name == node and all(status.get(k) == v for k, v in expected.items())

    return pred


# --------------------------------------------------------------------------- phases


async def test_control_plane_late_subscriber_sees_retained_phase(
    broker_url: str, run_id: str
) -> None:
    """A node connecting after the announcement gets the current (retained) phase."""
    async with ControlPlane(broker_url, run_id=run_id, node="sim") as sim:
        await sim.announce_phase("enroll")
        await sim.announce_phase("collect", users=943)
        async with ControlPlane(broker_url, run_id=run_id, node="shard-0") as late:
            phase = await late.wait_for_phase("collect", timeout=STEP_TIMEOUT)
            assert (phase.name, phase.seq, phase.node, dict(phase.info)) == (
                "collect", 2, "sim", {"users": 943},
            )  # fmt: skip
            # An earlier target is satisfied by the current, later phase.
            assert (await late.wait_for_phase("enroll", timeout=STEP_TIMEOUT)).name == "collect"
            with pytest.raises(TimeoutError, match="train"):
                await late.wait_for_phase("train", timeout=0.3)


async def test_control_plane_phases_arrive_in_order(broker_url: str, run_id: str) -> None:
    """Every phase announced after subscribing is yielded once, in announcement order."""
    async with (
        ControlPlane(broker_url, run_id=run_id, node="server") as server,
        ControlPlane(broker_url, run_id=run_id, node="sim") as sim,
    ):
        feed = await server.phases().subscribed()
        for name in PHASES:
            await sim.announce_phase(name)
        seen: list[Phase] = []
        async with asyncio.timeout(STEP_TIMEOUT):
            async for phase in feed:
                seen.append(phase)
                if phase.name == "done":
                    break
        assert [p.name for p in seen] == list(PHASES)
        assert [p.seq for p in seen] == list(range(1, len(PHASES) + 1))


async def test_control_plane_concurrent_feeds(broker_url: str, run_id: str) -> None:
    """Phase, observation and status feeds of one connection are consumed concurrently."""
    async with (
        ControlPlane(broker_url, run_id=run_id, node="adversary") as adv,
        ControlPlane(broker_url, run_id=run_id, node="server") as server,
    ):
        obs = await adv.observations().subscribed()
        phases = await adv.phases().subscribed()
        statuses = await adv.node_statuses().subscribed()
        async with asyncio.TaskGroup() as tg:
            t_obs = tg.create_task(_first(obs, lambda p: p == b"record-3"))
            t_phase = tg.create_task(_first(phases, lambda p: p.name == "attack"))
            t_status = tg.create_task(_first(statuses, _is("server", state="online")))
            for i in range(4):
                await server.publish_observation(f"record-{i}".encode())
            await server.announce_phase("attack")
        assert t_obs.result() == b"record-3"
        assert t_phase.result().name == "attack"
        assert t_status.result()[1]["pid"] == os.getpid()


# --------------------------------------------------------------------------- observations


async def test_control_plane_observation_bytes_round_trip(broker_url: str, run_id: str) -> None:
    """Observation payloads (empty, binary, 256 KiB) arrive byte-identical and in order."""
    big = secrets.token_bytes(256 * 1024)
    payloads = [b"", bytes(range(256)), b"\x00" * 17, big, b"tail"]
    async with (
        ControlPlane(broker_url, run_id=run_id, node="adversary") as adv,
        ControlPlane(broker_url, run_id=run_id, node="server") as server,
    ):
        feed = await adv.observations().subscribed()
        for payload in payloads:
            await server.publish_observation(payload)
        received: list[bytes] = []
        async with asyncio.timeout(STEP_TIMEOUT):
            async for payload in feed:
                received.append(payload)
                if len(received) == len(payloads):
                    break
        assert [len(p) for p in received] == [len(p) for p in payloads]
        assert received == payloads


async def test_control_plane_model_announcement_retained(broker_url: str, run_id: str) -> None:
    """A model announcement is retained for readers that connect later."""
    async with ControlPlane(broker_url, run_id=run_id, node="server") as server:
        sent = await server.publish_model_announcement(name="knn", version=2)
    async with ControlPlane(broker_url, run_id=run_id, node="sim") as sim:
        got = await _first(sim.model_announcements(), lambda a: a.get("name") == "knn")
    assert got == sent
    assert got["node"] == "server"


# --------------------------------------------------------------------------- liveness

_VICTIM = """
import asyncio, sys
from privrec.shared.control import ControlPlane

async def main() -> None:
    async with ControlPlane(sys.argv[1], run_id=sys.argv[2], node="victim", timeout=5):
        print("CONNECTED", flush=True)
        await asyncio.sleep(3600)

asyncio.run(main())
"""


async def test_control_plane_last_will_on_sigkill(broker_url: str, run_id: str) -> None:
    """A node process killed with SIGKILL is reported offline/lost by its last will."""
    async with ControlPlane(broker_url, run_id=run_id, node="sim") as sim:
        statuses = await sim.node_statuses().subscribed()
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", _VICTIM, broker_url, run_id,
            stdout=asyncio.subprocess.PIPE,
            cwd=Path(__file__).resolve().parents[2],
        )  # fmt: skip
        try:
            async with asyncio.timeout(STEP_TIMEOUT):
                assert proc.stdout is not None
                assert (await proc.stdout.readline()).strip() == b"CONNECTED"
            online = await _first(statuses, _is("victim", state="online"))
            assert online[1]["pid"] == proc.pid
            proc.send_signal(signal.SIGKILL)
            lost = await _first(statuses, _is("victim", state="offline"))
        finally:
            if proc.returncode is None:
                proc.kill()
            await proc.wait()
        assert lost[1] == {"node": "victim", "state": "offline", "reason": "lost"}
    # The will is retained: a node joining afterwards still learns the victim was lost.
    async with ControlPlane(broker_url, run_id=run_id, node="late") as late:
        _, status = await _first(late.node_statuses(), _is("victim"))
        assert status["reason"] == "lost"


async def test_control_plane_clean_stop_publishes_stopped(broker_url: str, run_id: str) -> None:
    """Leaving the context publishes offline/stopped (and no will); re-entering works."""
    observer = ControlPlane(broker_url, run_id=run_id, node="sim")
    node = ControlPlane(broker_url, run_id=run_id, node="shard-1")
    async with observer:
        statuses = await observer.node_statuses().subscribed()
        for _round in range(2):  # reusable: enter, leave, enter again
            async with node:
                await _first(statuses, _is("shard-1", state="online"))
                with pytest.raises(ControlPlaneError, match="re-entrant"):
                    await node.__aenter__()
            _, stopped = await _first(statuses, _is("shard-1", state="offline"))
            assert stopped["reason"] == "stopped"
            assert stopped["ts"] > 0
        assert not node.connected
        with pytest.raises(ControlPlaneError, match="not connected"):
            await node.publish_observation(b"x")


async def test_broker_sends_no_unsolicited_retained_messages(broker_url: str, run_id: str) -> None:
    """Regression: amqtt 0.12.1 pushed other clients' retained topics to every new connection."""
    async with ControlPlane(broker_url, run_id=run_id, node="sim") as sim:
        # The filter now exists at the broker, and sim's retained "online" status matches it.
        await sim.node_statuses().subscribed()
        host, port = parse_mqtt_url(broker_url)
        async with aiomqtt.Client(host, port, identifier=f"bare-{run_id}") as bare:
            await asyncio.sleep(0.3)  # retained messages arrive within ms on loopback
            assert len(bare.messages) == 0


def test_broker_process_prints_ready_and_stops_on_sigterm() -> None:
    """`python -m privrec.sim.broker --port 0` prints READY <port>, serves, exits 0 on SIGTERM."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "privrec.sim.broker", "--host", HOST, "--port", "0"],
        stdout=subprocess.PIPE,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        assert proc.stdout is not None
        word, port = proc.stdout.readline().split()
        assert word == b"READY"
        with socket.create_connection((HOST, int(port)), timeout=STEP_TIMEOUT):
            pass
        proc.terminate()
        assert proc.wait(timeout=STEP_TIMEOUT) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("url", "part"),
    [
        ("tcp://127.0.0.1:1883", "scheme"),
        ("127.0.0.1:1883", "scheme"),
        ("mqtt://:1883", "host"),
        ("mqtt://127.0.0.1:http", "port"),
        ("mqtt://127.0.0.1:70000", "port"),
        ("mqtt://127.0.0.1:0", "port"),
        ("mqtt://127.0.0.1:1883/privrec", "path"),
        ("mqtt://user:pw@127.0.0.1:1883", "credentials"),
        ("", "non-empty"),
    ],
)
def test_parse_mqtt_url_rejects_bad_url(url: str, part: str) -> None:
    """A malformed broker URL raises ConfigError naming the bad part."""
    with pytest.raises(ConfigError, match=part):
        parse_mqtt_url(url)
    with pytest.raises(ConfigError, match=part):
        ControlPlane(url, run_id="r", node="sim")


def test_parse_mqtt_url_accepts_good_urls() -> None:
    """Host/port come back as given; the port defaults to 1883; IPv6 loses its brackets."""
    assert parse_mqtt_url("mqtt://127.0.0.1:41234") == ("127.0.0.1", 41234)
    assert parse_mqtt_url("mqtt://broker.local") == ("broker.local", 1883)
    assert parse_mqtt_url("mqtt://[::1]:1884/") == ("::1", 1884)


def test_topic_for_builds_topics_and_rejects_wildcards() -> None:
    """Topics follow privrec/{run_id}/...; a run id or node with '/', '+', '#' is refused."""
    assert topic_for("r1", "phase") == "privrec/r1/phase"
    assert topic_for("r1", "nodes", "shard-0", "status") == "privrec/r1/nodes/shard-0/status"
    for bad in ("a/b", "a+", "#", ""):
        with pytest.raises(ConfigError, match="run_id"):
            topic_for(bad, "phase")
        with pytest.raises(ConfigError, match="node"):
            ControlPlane("mqtt://127.0.0.1:1883", run_id="r", node=bad)


async def test_control_plane_unreachable_broker_raises_quickly(run_id: str) -> None:
    """Connecting to a port nobody listens on fails fast with ControlPlaneError naming the URL."""
    url = f"mqtt://{HOST}:{free_port(HOST)}"
    plane = ControlPlane(url, run_id=run_id, node="sim", timeout=1.0)
    start = time.monotonic()
    with pytest.raises(ControlPlaneError, match=re.escape(url)) as info:
        async with plane:
            pass
    assert time.monotonic() - start < 3.0
    assert info.value.url == url
    assert not plane.connected
