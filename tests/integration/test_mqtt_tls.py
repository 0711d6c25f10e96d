"""The control plane over TLS: the embedded amqtt broker and Mosquitto, both with mutual TLS
using a `privrec certs` directory (issue 12 (3))."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from privrec.shared.control import ControlPlane
from privrec.shared.control.topics import ControlPlaneError
from privrec.shared.tls import make_certs
from privrec.sim.broker import EmbeddedBroker
from tests.conftest import HOST, _mosquitto_binary, _wait_listening, free_port, mosquitto_tls_conf

pytestmark = pytest.mark.broker


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_certs(tmp_path_factory.mktemp("tls"), ["sim", "shard-0", "adversary"])


@pytest.fixture(scope="module")
def amqtt_tls(certs: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("amqtt-tls") / "broker.log"
    with EmbeddedBroker(HOST, log_file=log, tls_dir=certs) as broker:
        assert broker.url.startswith("mqtts://")
        yield broker.url


@pytest.fixture(scope="module")
def mosquitto_tls(certs: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    binary = _mosquitto_binary()
    if binary is None:
        pytest.skip("mosquitto binary not found (apt-get install mosquitto); CI installs it")
    work = tmp_path_factory.mktemp("mosq-tls")
    port = free_port(HOST)
    conf = work / "mosquitto.conf"
    conf.write_text(mosquitto_tls_conf(certs, port))
    log = (work / "mosquitto.log").open("ab")
    proc = subprocess.Popen([binary, "-c", str(conf)], stdout=log, stderr=log)
    try:
        if not _wait_listening(HOST, port, proc, timeout=5.0):
            pytest.fail(f"mosquitto (TLS) did not start; see {work / 'mosquitto.log'}")
        yield f"mqtts://{HOST}:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=5)
        log.close()


async def _round_trip(url: str, certs: Path) -> None:
    """(The feed is the server's to write and the adversary's to read: `shared.control.acl`.)"""
    run = f"tls-{time.monotonic_ns()}"
    async with (
        ControlPlane(url, run_id=run, node="sim", tls_dir=certs) as sim,
        ControlPlane(url, run_id=run, node="shard-0", tls_dir=certs) as shard,
        ControlPlane(url, run_id=run, node="server", tls_dir=certs) as server,
        ControlPlane(url, run_id=run, node="adversary", tls_dir=certs) as adversary,
    ):
        feed = await adversary.observations().subscribed()
        await sim.announce_phase("collect")
        phase = await shard.wait_for_phase("collect", timeout=10)
        assert phase.name == "collect"
        await server.publish_observation(b"\x01\x02")
        got = await asyncio.wait_for(feed.__anext__(), 10)
        assert got == b"\x01\x02"


@pytest.mark.parametrize("broker", ["amqtt_tls", "mosquitto_tls"])
async def test_control_plane_over_mutual_tls(
    broker: str, certs: Path, request: pytest.FixtureRequest
) -> None:
    """Phases and the observation feed pass over mqtts:// with the run's certificates."""
    await _round_trip(request.getfixturevalue(broker), certs)


@pytest.mark.parametrize("broker", ["amqtt_tls", "mosquitto_tls"])
async def test_a_client_without_the_runs_certificate_is_refused(
    broker: str, certs: Path, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """No client certificate (the system's CAs, which do not know the run's CA) or a plaintext
    connection: no connection."""
    url = request.getfixturevalue(broker)
    with pytest.raises(ControlPlaneError):
        async with ControlPlane(url, run_id="r", node="sim", timeout=2.0):
            pass
    with pytest.raises(ControlPlaneError):
        async with ControlPlane(
            url.replace("mqtts://", "mqtt://"), run_id="r", node="sim", timeout=2.0
        ):
            pass
    other = make_certs(tmp_path / "other", ["sim"])  # another CA
    with pytest.raises(ControlPlaneError):
        async with ControlPlane(url, run_id="r", node="sim", tls_dir=other, timeout=2.0):
            pass
