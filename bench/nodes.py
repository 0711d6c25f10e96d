"""Pieces the benchmarks share: a `privrec server` process, and shard processes of a run.

`bench/ingest.py` measures ingest into a server process; `bench/vs_flower.py` measures a
whole collect (server + `privrec clients` shard processes) against Flower. Both start the
server the same way, through `start_server`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from privrec.server.node import ADMIN_TOKEN_ENV
from privrec.sim.launcher import NodeProcess, spawn, wait_file


def _run_args(config: Path, workdir: Path, run_id: str) -> list[str]:
    """The options every node of one run takes: its config, run directory and run id."""
    return ["--config", str(config), "--run-dir", str(workdir), "--run-id", run_id]


def start_server(
    workdir: Path,
    config: Path,
    run_id: str,
    security_args: list[str],
    admin_token: str,
    *,
    timeout: float = 60.0,
) -> tuple[NodeProcess, str]:
    """Spawn `privrec server` on a free local port and wait until it serves.

    Args:
        workdir: the run directory (store, logs/server.log, the ready file).
        config: the experiment TOML the server reads.
        run_id: the run's name.
        security_args: ``["--insecure"]`` or `RunSecurity.server_args()`.
        admin_token: the operator's admin token (passed in the environment).

    Returns:
        (the process, its ``host:port`` target).
    """
    ready = workdir / "server.ready"
    ready.unlink(missing_ok=True)
    server = spawn(
        "server",
        [
            "server",
            *_run_args(config, workdir, run_id),
            "--ready-file",
            str(ready),
            *security_args,
        ],
        workdir / "logs",
        {ADMIN_TOKEN_ENV: admin_token},
    )
    try:
        port = int(wait_file(ready, timeout, [server]).split()[0])
    except BaseException:
        server.stop()
        raise
    return server, f"127.0.0.1:{port}"


def start_shards(
    workdir: Path,
    config: Path,
    run_id: str,
    target: str,
    n_shards: int,
    security_args: Callable[[str], list[str]],
) -> list[NodeProcess]:
    """Spawn `privrec clients --shard i/N` for i < N, polling the server for phases;
    `security_args(node)` gives a node's options (`RunSecurity.node_args`)."""
    return [
        spawn(
            f"shard-{i}",
            [
                "clients",
                *_run_args(config, workdir, run_id),
                "--server",
                target,
                "--shard",
                f"{i}/{n_shards}",
                *security_args(f"shard-{i}"),
            ],
            workdir / "logs",
        )
        for i in range(n_shards)
    ]


__all__ = ["start_server", "start_shards"]
