"""Addresses are validated when parsed (issue 27, finding 6): a malformed or unresolvable
`--server` is refused at once, before any connection attempt, by every command that takes one."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from privrec.shared.addresses import split_address
from privrec.shared.errors import ConfigError

QUICK_S = 5.0  # refused well before a retry loop (180 s) or a resolver's retries (14 s)


def privrec(*args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    env = {**os.environ, "PRIVREC_ADMIN_TOKEN": "t"}
    t = time.monotonic()
    res = subprocess.run(
        [sys.executable, "-m", "privrec", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )
    return res, time.monotonic() - t


BAD = [
    ("garbage", "expected HOST:PORT"),
    ("127.0.0.1:99999", "1..65535"),
    ("127.0.0.1:0", "1..65535"),
    ("127.0.0.1:http", "1..65535"),
    (":50051", "expected HOST:PORT"),
    ("::1:50051", "brackets"),
    ("no-such-host.invalid:50051", "does not resolve"),
]


@pytest.mark.parametrize(("address", "says"), BAD)
def test_a_client_node_refuses_a_bad_server_address_at_once(
    address: str, says: str, tmp_path: Path
) -> None:
    """Regression: #27 (6) `privrec clients --server garbage` retried for 180 s and then named
    a different port."""
    res, took = privrec(
        "clients", "--server", address, "--shard", "0/1", "--run-dir", str(tmp_path),
        "--run-id", "r", "--insecure",
    )  # fmt: skip
    assert res.returncode == 2, res.stderr[-1000:]
    assert "argument --server" in res.stderr and says in res.stderr, res.stderr[-500:]
    assert took < QUICK_S + 5  # the interpreter's start-up included


@pytest.mark.parametrize("command", ["status", "phase"])
def test_admin_refuses_an_unresolvable_host_at_once(command: str) -> None:
    """Regression: #27 (6) an unresolvable host took 14 s to be refused by `privrec admin`."""
    extra = ["collect"] if command == "phase" else []
    res, took = privrec("admin", command, *extra, "--server", "no-such-host.invalid:50051",
                        "--run-id", "r")  # fmt: skip
    assert res.returncode == 2
    assert "does not resolve" in res.stderr
    assert took < QUICK_S + 5


@pytest.mark.parametrize("command", ["adversary", "sybils"])
def test_every_node_checks_its_server_address(command: str, tmp_path: Path) -> None:
    res, _ = privrec(
        command, "--server", "127.0.0.1:70000", "--run-dir", str(tmp_path), "--run-id", "r",
        "--insecure",
    )  # fmt: skip
    assert res.returncode == 2 and "1..65535" in res.stderr


@pytest.mark.parametrize(
    ("address", "parsed"),
    [("127.0.0.1:50051", ("127.0.0.1", 50051)), ("[::1]:1", ("::1", 1)), ("h:65535", ("h", 65535))],
)
def test_split_address_accepts_hosts_and_ports(address: str, parsed: tuple[str, int]) -> None:
    assert split_address(address) == parsed


@pytest.mark.parametrize(("address", "says"), BAD[:-1])
def test_split_address_names_what_is_wrong(address: str, says: str) -> None:
    with pytest.raises(ConfigError, match=f"--server: .*{says}"):
        split_address(address)
