"""`privrec admin`: the operator's phase commands, run as subprocesses against real servers.

Most tests serve an `Aggregator` over a grpc.aio server on port 0 in the test's event loop (so
the test can also act on the core: enroll users, submit releases, move the phase); one starts a
real `privrec server` process, to read the admin token from the ready file it writes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import sys
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest

from privrec.server.aggregator import Aggregator
from privrec.server.node import ADMIN_TOKEN_ENV
from privrec.server.store import Store
from privrec.shared.mechanisms import RandomizedPerturbation
from privrec.shared.mechanisms.base import Profile
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.protocol import PHASES, profile_nonce
from privrec.shared.serde import payload_to_proto
from privrec.sim.cli import main
from privrec.sim.cli_admin import _token_from_file
from privrec.sim.launcher import spawn, wait_file
from tests.grpc_helpers import one_tier_spec, serving

pytestmark = pytest.mark.timeout(300)

RUN = "adm-run"
ADMIN = "admin-secret"
N_ITEMS = 40
STATUS_KEYS = {
    "run_id",
    "phase",
    "round",
    "enrolled",
    "profiles",
    "public_profiles",
    "releases_accepted",
    "releases_rejected",
    "duplicates",
    "queries",
    "transcript_records",
    "train_seconds",
}


@dataclasses.dataclass
class Result:
    code: int
    out: str
    err: str


async def privrec_admin(*args: str, token: str | None = ADMIN) -> Result:
    """`python -m privrec.sim.cli admin ARGS...` as its own process, without blocking the event loop
    (the in-process server answers it from that loop)."""
    env = {k: v for k, v in os.environ.items() if k != ADMIN_TOKEN_ENV}
    if token is not None:
        env[ADMIN_TOKEN_ENV] = token
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "privrec.sim.cli",
        "admin",
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)  # a loaded machine starts slowly
    assert proc.returncode is not None
    return Result(proc.returncode, out.decode(), err.decode())


def assert_one_line_error(res: Result, *needles: str) -> None:
    """The CLI contract: exit status 2 and one line `privrec: error: ...` naming the cause."""
    assert res.code == 2, res
    lines = res.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("privrec: error: "), res.err
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert res.out == ""


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[Aggregator, list[str]]]:
    """A one-tier aggregator on a grpc.aio server on port 0; yields the core and the common
    `--server --run-id` arguments."""
    spec = one_tier_spec(RUN, ADMIN, N_ITEMS)
    core = Aggregator(spec, Store(tmp_path / "server.sqlite"))
    async with serving(core) as port:
        yield core, ["--server", f"127.0.0.1:{port}", "--run-id", RUN]


def admin_req(phase: str) -> pb.SetPhaseRequest:
    return pb.SetPhaseRequest(run_id=RUN, admin_token=ADMIN, phase=phase)


def enroll_and_release(core: Aggregator, users: list[str]) -> list[bytes]:
    """Enroll `users` (phase enroll) and build one profile release each."""
    raws = []
    for i, user in enumerate(users):
        token = core.enroll(
            pb.EnrollRequest(
                run_id=RUN, user_id=user, shard="0/1", tier=pb.TIER_PRIVATE
            ).SerializeToString()
        ).token
        rng = np.random.default_rng(i)
        items = np.sort(rng.choice(N_ITEMS, 12, replace=False))
        prof = Profile(items, rng.integers(1, 6, 12).astype(float), N_ITEMS)
        rel = pb.Release(
            run_id=RUN, user_id=user, token=token, nonce=profile_nonce(), purpose=pb.PURPOSE_PROFILE
        )
        payload_to_proto("rpt", RandomizedPerturbation(1.0, 10).release(prof, rng), rel)
        raws.append(rel.SerializeToString())
    return raws


async def test_admin_status_against_a_server_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Against a `privrec server` process: `status --json --token-file READY` (the token the
    server made up and wrote to its ready file) shows the phase enroll."""
    (tmp_path / "c.toml").write_text(
        '[run]\nname = "adm"\n[data]\ndataset = "synthetic"\n'
        "synthetic_users = 30\nsynthetic_items = 40\n"
    )
    monkeypatch.delenv(ADMIN_TOKEN_ENV, raising=False)  # so the server makes up its token
    ready = tmp_path / "server.ready"
    node = spawn(
        "server",
        [
            "server",
            "--config",
            str(tmp_path / "c.toml"),
            "--run-dir",
            str(tmp_path),
            "--run-id",
            "r1",
            "--ready-file",
            str(ready),
            "--insecure",
        ],
        tmp_path / "logs",
    )
    try:
        port = int(wait_file(ready, 30, [node]).split()[0])
        target = ["--server", f"127.0.0.1:{port}", "--run-id", "r1"]
        res = await privrec_admin(
            "status", *target, "--token-file", str(ready), "--json", token=None
        )
    finally:
        node.stop()
    assert res.code == 0, res.err
    status = json.loads(res.out)
    assert set(status) == STATUS_KEYS
    assert status["phase"] == "enroll" and status["run_id"] == "r1"
    assert status["profiles"] == status["enrolled"] == 0


async def test_admin_phase_enroll_then_public(served) -> None:
    """`phase enroll` prints the status table, then `phase public --json` moves the run on."""
    core, target = served
    res = await privrec_admin("phase", "enroll", *target)
    assert res.code == 0, res.err
    assert "enroll" in res.out and "transcript records" in res.out
    res = await privrec_admin("phase", "public", *target, "--json")
    assert res.code == 0, res.err
    assert json.loads(res.out)["phase"] == "public"
    assert core.phase == "public"


async def test_admin_refusals_exit_2_and_leave_the_phase(served) -> None:
    """Each refusal exits 2 with one line and leaves the phase as it was: a wrong token (the
    line names admin_token); going back a phase (the server's FAILED_PRECONDITION message);
    `--wait-profiles 5 --timeout 1` with no profile in (after ~1 s, SetPhase never called).
    The three run concurrently to keep the file short."""
    core, target = served
    core.set_phase(admin_req("public"))
    t = time.monotonic()
    wrong, back, waited = await asyncio.gather(
        privrec_admin("phase", "collect", *target, token="not-it"),
        privrec_admin("phase", "enroll", *target),
        privrec_admin("phase", "train", *target, "--wait-profiles", "5", "--timeout", "1"),
    )
    assert_one_line_error(wrong, "admin_token", "UNAUTHENTICATED")
    assert_one_line_error(back, "cannot go back from 'public' to 'enroll'", "FAILED_PRECONDITION")
    assert_one_line_error(waited, "--wait-profiles", "0 profiles", "5 needed", "'train' not set")
    assert time.monotonic() - t >= 1.0
    assert core.phase == "public"


async def test_admin_wait_profiles_sets_phase_once_they_are_in(served) -> None:
    """The operator's "train once 20 profiles are in": waits, then SetPhase(train)."""
    core, target = served
    users = [f"u{i}" for i in range(20)]
    raws = enroll_and_release(core, users)
    core.set_phase(admin_req("collect"))
    polled = threading.Event()  # set once the CLI has seen the count short of its target
    get_status = core.get_status

    def spy(req: pb.GetStatusRequest) -> pb.RunStatus:
        status = get_status(req)
        if status.profiles < len(users):
            polled.set()
        return status

    core.get_status = spy  # type: ignore[method-assign]
    cli = asyncio.create_task(
        privrec_admin(
            "phase", "train", *target, "--wait-profiles", "20", "--timeout", "20", "--json"
        )
    )
    while not polled.is_set():
        assert not cli.done(), cli.result()
        await asyncio.sleep(0.02)
    assert core.phase == "collect"
    core.submit_many(raws[:10])
    core.submit_many(raws[10:])
    res = await cli
    assert res.code == 0, res.err
    status = json.loads(res.out)
    assert status["phase"] == "train" and status["profiles"] == 20
    assert core.phase == "train"


def test_admin_missing_token_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No PRIVREC_ADMIN_TOKEN and no --token-file: exit 2 before any call, one line."""
    monkeypatch.delenv(ADMIN_TOKEN_ENV, raising=False)
    assert main(["admin", "status", "--server", "127.0.0.1:1", "--run-id", RUN]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("privrec: error: ")
    assert ADMIN_TOKEN_ENV in err and "--token-file" in err


def test_admin_unreachable_server_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nobody listening: exit 2, one line naming the server and UNAVAILABLE."""
    monkeypatch.setenv(ADMIN_TOKEN_ENV, ADMIN)
    assert main(["admin", "status", "--server", "127.0.0.1:1", "--run-id", RUN]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("privrec: error: server 127.0.0.1:1: ")
    assert "UNAVAILABLE" in err


@pytest.mark.parametrize("command", [["admin"], ["admin", "status"], ["admin", "phase"]])
def test_admin_help_on_each_subcommand(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """`--help` works on `admin` and each of its subcommands."""
    with pytest.raises(SystemExit) as info:
        main([*command, "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: privrec {' '.join(command)}")
    if command[-1] == "phase":
        assert "--wait-profiles" in out and all(p in out for p in PHASES)


@pytest.mark.parametrize(
    ("text", "token"),
    [
        ("s3cret\n", "s3cret"),  # a token file
        ("50051\nabc123", "abc123"),  # a ready file with the generated token
        ("50051\n", ""),  # a ready file of a server given the env var
    ],
)
def test_token_from_file(text: str, token: str) -> None:
    """--token-file reads a plain token file or the server's --ready-file."""
    assert _token_from_file(text) == token
