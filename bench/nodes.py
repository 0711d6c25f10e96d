"""Pieces the benchmarks share: a `privrec server` process, and shard processes of a run.

`bench/ingest.py` measures ingest into a server process; `bench/vs_flower.py` measures a
whole collect (server + `privrec clients` shard processes) against Flower. Both start the
server the same way, through `start_server`.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

from privrec.server.node import ADMIN_TOKEN_ENV
from privrec.sim.launcher import NodeProcess, spawn, wait_file

READY_FILE = "server.ready"


def _run_args(config: Path, workdir: Path, run_id: str) -> list[str]:
    """The options every node of one run takes: its config, run directory and run id."""
    return ["--config", str(config), "--run-dir", str(workdir), "--run-id", run_id]


def free_port(host: str = "127.0.0.1") -> int:
    """A port no one listens on right now (the OS's choice for a bind to port 0).

    For starting the shards beside the server: they need its address before it serves. Another
    process could take the port in between; the server then fails to bind and says so.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def spawn_server(
    workdir: Path,
    config: Path,
    run_id: str,
    security_args: list[str],
    admin_token: str,
    *,
    port: int = 0,
) -> NodeProcess:
    """Spawn `privrec server` (on `port`, 0: a free one) without waiting; `wait_serving` waits.

    Args:
        workdir: the run directory (store, logs/server.log, the ready file).
        config: the experiment TOML the server reads.
        run_id: the run's name.
        security_args: ``["--insecure"]`` or `RunSecurity.server_args()`.
        admin_token: the operator's admin token (passed in the environment).
        port: the port to serve on.
    """
    (workdir / READY_FILE).unlink(missing_ok=True)
    return spawn(
        "server",
        [
            "server",
            *_run_args(config, workdir, run_id),
            "--port",
            str(port),
            "--ready-file",
            str(workdir / READY_FILE),
            *security_args,
        ],
        workdir / "logs",
        {ADMIN_TOKEN_ENV: admin_token},
    )


def wait_serving(server: NodeProcess, workdir: Path, timeout: float = 60.0) -> str:
    """Wait until `server` (from `spawn_server`) serves; its ``host:port`` target. Stops the
    server if it does not."""
    try:
        port = int(wait_file(workdir / READY_FILE, timeout, [server]).split()[0])
    except BaseException:
        server.stop()
        raise
    return f"127.0.0.1:{port}"


def start_server(
    workdir: Path,
    config: Path,
    run_id: str,
    security_args: list[str],
    admin_token: str,
    *,
    timeout: float = 60.0,
) -> tuple[NodeProcess, str]:
    """Spawn `privrec server` on a free local port and wait until it serves
    (`spawn_server`'s arguments).

    Returns:
        (the process, its ``host:port`` target).
    """
    server = spawn_server(workdir, config, run_id, security_args, admin_token)
    return server, wait_serving(server, workdir, timeout)


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


__all__ = ["free_port", "spawn_server", "start_server", "start_shards", "wait_serving"]
