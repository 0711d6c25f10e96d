"""An embedded amqtt MQTT broker, run as its own OS process.

`privrec sim --mqtt embedded` needs a broker without asking the user to install one. This module
runs amqtt's `Broker` in a child process so that a crash or a slow event loop on the broker side
never stalls the orchestrator, and so that nodes see exactly what they would see with Mosquitto:
a TCP endpoint.

Command line (the process contract)::

    python -m privrec.sim.broker --host 127.0.0.1 --port 0 [--ready-file F] [--log-level WARNING]
        [--tls-dir DIR]

With `--tls-dir` (a `privrec certs` directory) the listener speaks TLS with ``broker.pem`` and
requires a client certificate signed by the directory's CA (mutual TLS); the URL is then
``mqtts://HOST:PORT``, and every topic is permitted by the client's certificate
(`shared.control.acl`, enforced by the topic plugin `sim.broker_acl`): a client node cannot
announce a phase nor read the observation feed.

`--port 0` picks a free port. Once the listener accepts connections the process writes the
actual port number to `--ready-file` (atomically, via a rename) or, without that option, prints
``READY <port>`` on stdout. SIGTERM or SIGINT shuts the broker down cleanly (exit status 0).

Python helper::

    with EmbeddedBroker() as broker:      # spawns the process and waits until it is ready
        url = broker.url                  # "mqtt://127.0.0.1:PORT"

Design choice: we bind the TCP socket ourselves with `asyncio.start_server` and hand every
connection to amqtt through its *external* listener type (`Broker.external_connected`). That is
amqtt's public hook for connections it did not accept itself, and it lets us learn the port
chosen for `--port 0` without reaching into the broker's private server table. The broker is
configured with anonymous access only: no persistence, no `$SYS` topics, no packet logging.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self

from privrec.shared.errors import PrivrecError
from privrec.shared.lifecycle import orchestrated_env, watch_orchestrator

logger = logging.getLogger(__name__)

_LISTENER = "default"
_STOP_GRACE_S = 5.0


class BrokerStartError(PrivrecError):
    """The embedded broker process exited or did not become ready in time."""


def broker_config(*, certificate_acl: bool = False) -> dict[str, Any]:
    """Return the amqtt 0.12 `BrokerConfig` dictionary used by the embedded broker.

    One external listener (connections are accepted by our own socket server), anonymous
    clients allowed (the identity is the TLS client certificate, not an MQTT user name), and
    no other plugins: the default set adds `$SYS` publishing every 20 s and per-event/per-packet
    loggers, which are noise for a simulation.

    Args:
        certificate_acl: permit topics by client certificate (`sim.broker_acl`); a TLS broker.

    Returns:
        A dictionary accepted by `amqtt.broker.Broker(config=...)`.
    """
    plugins: dict[str, Any] = {
        "amqtt.plugins.authentication.AnonymousAuthPlugin": {"allow_anonymous": True},
    }
    if certificate_acl:
        plugins["privrec.sim.broker_acl.CertificateTopicPlugin"] = {}
    return {"listeners": {_LISTENER: {"type": "external"}}, "plugins": plugins}


def _quiet_third_party_logs(level: int) -> None:
    """Cap amqtt's and transitions' loggers at `level` (amqtt logs every connect at INFO)."""
    for name in ("amqtt", "transitions"):
        logging.getLogger(name).setLevel(max(level, logging.WARNING))


def _write_ready_file(path: Path, port: int) -> None:
    """Write `port` to `path` atomically, so a poller never reads a half-written file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(f"{port}\n", encoding="utf-8")
    os.replace(tmp, path)


def _make_broker(*, certificate_acl: bool = False) -> Any:
    """Build the amqtt `Broker`, patched for one amqtt 0.12.1 defect.

    On every CONNECT, amqtt 0.12.1 (`Broker._handle_client_session`) walks *all* topic filters
    any client subscribed to and sends the new client the matching retained messages, awaiting
    inside the loop over the live dict. That (a) hands a fresh clean session retained messages
    it never subscribed to, and (b) crashes the connection with "dictionary changed size during
    iteration" when another client subscribes meanwhile, which made one connect in a few hundred
    fail under concurrent nodes. We skip filters the session is not subscribed to: the
    SUBSCRIBE path (the session is already in the filter's list then) is unaffected, and for a
    clean session the CONNECT loop then never suspends, so the dict cannot change under it.

    Returns:
        An `amqtt.broker.Broker` (typed `Any` so amqtt stays a lazy import).
    """
    from amqtt.broker import Broker  # type: ignore[import-untyped,unused-ignore]
    from amqtt.session import Session  # type: ignore[import-untyped,unused-ignore]

    class _PrivrecBroker(Broker):  # type: ignore[misc,unused-ignore]
        async def _publish_retained_messages_for_subscription(
            self, subscription: tuple[str, int], session: Session
        ) -> None:
            subscribers = self.subscriptions.get(subscription[0], [])
            if not any(s.client_id == session.client_id for s, _ in subscribers):
                return
            await super()._publish_retained_messages_for_subscription(subscription, session)

    return _PrivrecBroker(config=broker_config(certificate_acl=certificate_acl))


async def serve(
    host: str,
    port: int,
    ready_file: Path | None = None,
    tls_dir: Path | None = None,
    *,
    on_ready: Callable[[int], None] | None = None,
) -> None:
    """Run the broker until SIGTERM/SIGINT.

    Args:
        host: interface to bind, e.g. "127.0.0.1".
        port: TCP port; 0 picks a free one.
        ready_file: where to write the bound port once connections are accepted; None prints
            ``READY <port>`` on stdout instead (unless `on_ready` is given).
        tls_dir: serve mutual TLS with this `privrec certs` directory's broker certificate.
        on_ready: called with the bound port once connections are accepted (`privrec broker`
            prints the URL).

    Raises:
        OSError: the port cannot be bound (e.g. another broker listens there).
    """
    _quiet_third_party_logs(logging.getLogger().getEffectiveLevel())
    # Imported here so `EmbeddedBroker` users do not pay for amqtt in the parent process.
    from amqtt.adapters import (  # type: ignore[import-untyped,unused-ignore]
        StreamReaderAdapter,
        StreamWriterAdapter,
    )

    from privrec.sim.broker_acl import CertificateNames

    broker = _make_broker(certificate_acl=tls_dir is not None)
    await broker.start()

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = tuple(writer.get_extra_info("peername")[:2])
        CertificateNames.record(peer, writer.get_extra_info("ssl_object"))
        try:
            await broker.external_connected(
                StreamReaderAdapter(reader), StreamWriterAdapter(writer), _LISTENER
            )
        finally:
            CertificateNames.forget(peer)
            writer.close()

    ssl_ctx = None
    if tls_dir is not None:
        from privrec.shared.tls import server_ssl_context

        ssl_ctx = server_ssl_context(tls_dir)
    try:
        server = await asyncio.start_server(on_connect, host, port, reuse_address=True, ssl=ssl_ctx)
    except OSError:
        await broker.shutdown()
        raise
    bound_port = int(server.sockets[0].getsockname()[1])
    logger.info("embedded MQTT broker listening on %s:%d", host, bound_port)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    if ready_file is not None:
        _write_ready_file(ready_file, bound_port)
    if on_ready is not None:
        on_ready(bound_port)
    elif ready_file is None:
        sys.stdout.write(f"READY {bound_port}\n")
        sys.stdout.flush()

    await stop.wait()
    logger.info("embedded MQTT broker shutting down")
    server.close()
    await broker.shutdown()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(server.wait_closed(), timeout=_STOP_GRACE_S)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m privrec.sim.broker``.

    Args:
        argv: command-line arguments (default: `sys.argv[1:]`).

    Returns:
        The process exit status.
    """
    parser = argparse.ArgumentParser(
        prog="python -m privrec.sim.broker", description="Run the embedded amqtt MQTT broker."
    )
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="TCP port; 0 picks a free one")
    parser.add_argument("--ready-file", type=Path, default=None, help="write the bound port here")
    parser.add_argument("--log-level", default="WARNING", help="log level (default WARNING)")
    parser.add_argument("--tls-dir", type=Path, default=None, help="serve mutual TLS (certs dir)")
    args = parser.parse_args(argv)
    watch_orchestrator()  # started by `EmbeddedBroker`: stop when its process is gone
    level = logging.getLevelName(args.log_level.upper())
    if not isinstance(level, int):
        parser.error(f"--log-level: unknown level {args.log_level!r}")
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    _quiet_third_party_logs(level)
    asyncio.run(serve(args.host, args.port, args.ready_file, args.tls_dir))
    return 0


class EmbeddedBroker:
    """Run `python -m privrec.sim.broker` as a child process.

    A context manager: entering starts the process and waits until it accepts connections;
    leaving terminates it (SIGTERM, then SIGKILL after a grace period). `start()`/`stop()` may be
    used directly as well; `stop()` is idempotent.

    Args:
        host: interface the broker binds.
        port: TCP port; 0 (the default) lets the broker pick a free one.
        startup_timeout: seconds to wait for the ready file.
        log_file: where the broker's stdout/stderr go (default: discarded).
        log_level: the broker's log level.
        tls_dir: serve mutual TLS with this `privrec certs` directory (URL ``mqtts://``).
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        startup_timeout: float = 10.0,
        log_file: Path | None = None,
        log_level: str = "WARNING",
        tls_dir: Path | None = None,
    ) -> None:
        self.tls_dir = tls_dir
        self.host = host
        self.requested_port = port
        self.startup_timeout = startup_timeout
        self.log_file = log_file
        self.log_level = log_level
        self._proc: subprocess.Popen[bytes] | None = None
        self._port: int | None = None
        self._tmpdir: tempfile.TemporaryDirectory[str] | None = None

    @property
    def port(self) -> int:
        """The port the broker listens on (only after `start()`)."""
        if self._port is None:
            msg = "EmbeddedBroker is not running; call start() first"
            raise BrokerStartError(msg)
        return self._port

    @property
    def url(self) -> str:
        """The broker URL, ``mqtt://HOST:PORT``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        scheme = "mqtts" if self.tls_dir is not None else "mqtt"
        return f"{scheme}://{host}:{self.port}"

    @property
    def pid(self) -> int | None:
        """The broker process id, or None when not running."""
        return self._proc.pid if self._proc is not None else None

    def start(self) -> Self:
        """Spawn the broker process and wait until it accepts connections.

        Returns:
            self.

        Raises:
            BrokerStartError: the process exited early or did not report ready within
                `startup_timeout` seconds (the process is killed in that case).
        """
        if self._proc is not None:
            msg = "EmbeddedBroker already started"
            raise BrokerStartError(msg)
        self._tmpdir = tempfile.TemporaryDirectory(prefix="privrec-broker-")
        ready = Path(self._tmpdir.name) / "ready"
        cmd = [
            sys.executable, "-m", "privrec.sim.broker",
            "--host", self.host, "--port", str(self.requested_port),
            "--ready-file", str(ready), "--log-level", self.log_level,
        ]  # fmt: skip
        if self.tls_dir is not None:
            cmd += ["--tls-dir", str(self.tls_dir)]
        with contextlib.ExitStack() as stack:
            out = (
                stack.enter_context(self.log_file.open("ab"))
                if self.log_file is not None
                else subprocess.DEVNULL
            )
            self._proc = subprocess.Popen(
                cmd, stdout=out, stderr=out, stdin=subprocess.DEVNULL, env=orchestrated_env()
            )
        deadline = time.monotonic() + self.startup_timeout
        while not ready.exists():
            rc = self._proc.poll()
            if rc is not None:
                self._cleanup()
                msg = f"embedded MQTT broker exited with status {rc} before it was ready"
                raise BrokerStartError(msg)
            if time.monotonic() > deadline:
                self.stop()
                msg = f"embedded MQTT broker not ready after {self.startup_timeout:.1f} s"
                raise BrokerStartError(msg)
            time.sleep(0.02)
        self._port = int(ready.read_text(encoding="utf-8").strip())
        logger.info("embedded MQTT broker pid %d at %s", self._proc.pid, self.url)
        return self

    def stop(self) -> None:
        """Terminate the broker (SIGTERM, then SIGKILL after a grace period). Idempotent."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=_STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                logger.warning("embedded MQTT broker pid %d ignored SIGTERM; killing", proc.pid)
                proc.kill()
                proc.wait()
        self._cleanup()

    def _cleanup(self) -> None:
        self._proc = None
        self._port = None
        if self._tmpdir is not None:
            self._tmpdir.cleanup()
            self._tmpdir = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


if __name__ == "__main__":
    raise SystemExit(main())
