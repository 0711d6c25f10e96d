"""Shared fixtures: real MQTT brokers on free loopback ports (STYLE items 21–22)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from privrec.shared.control.acl import mosquitto_conf
from privrec.sim.broker import EmbeddedBroker

HOST = os.environ.get("PRIVREC_TEST_MQTT_HOST", "127.0.0.1")


def free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _wait_listening(host: str, port: int, proc: subprocess.Popen[bytes], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with socket.create_connection((host, port), timeout=0.2):
                return True
        except OSError:
            time.sleep(0.02)
    return False


def _mosquitto_binary() -> str | None:
    # Debian puts the broker in /usr/sbin, which is not on every user's PATH.
    return shutil.which("mosquitto") or shutil.which("mosquitto", path="/usr/sbin:/usr/local/sbin")


def mosquitto_tls_conf(certs: Path, port: int) -> str:
    """The configuration `privrec certs` writes (mutual TLS, topic permissions by certificate),
    on `port`, logging errors and refusals to stderr."""
    return (
        mosquitto_conf(certs, HOST, port) + "log_dest stderr\nlog_type error\nlog_type notice\n"
        # started as root, Mosquitto drops to user "mosquitto", who cannot read the 0700
        # certificate folder; stay as the user who made the certificates
        "user root\n"
    )


@pytest.fixture(scope="module")
def mosquitto_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Mosquitto process on a free loopback port; yields its ``mqtt://`` URL."""
    binary = _mosquitto_binary()
    if binary is None:
        pytest.skip("mosquitto binary not found (apt-get install mosquitto); CI installs it")
    workdir = tmp_path_factory.mktemp("mosquitto")
    # Mosquitto cannot report a port it picked itself, so choose one and retry on a lost race.
    for _attempt in range(5):
        port = free_port(HOST)
        conf = workdir / "mosquitto.conf"
        conf.write_text(
            f"listener {port} {HOST}\nallow_anonymous true\npersistence false\n"
            "log_dest stderr\nlog_type error\nlog_type warning\n",
            encoding="utf-8",
        )
        log = (workdir / "mosquitto.log").open("ab")
        proc = subprocess.Popen([binary, "-c", str(conf)], stdout=log, stderr=log)
        if _wait_listening(HOST, port, proc, timeout=5.0):
            break
        proc.kill()
        proc.wait()
        log.close()
    else:
        pytest.fail(f"mosquitto did not start; see {workdir / 'mosquitto.log'}")
    try:
        yield f"mqtt://{HOST}:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture(scope="module")
def amqtt_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The embedded amqtt broker process (`python -m privrec.sim.broker`); yields its URL."""
    log_file = tmp_path_factory.mktemp("amqtt") / "broker.log"
    with EmbeddedBroker(HOST, log_file=log_file) as broker:
        yield broker.url
