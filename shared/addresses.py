"""Server addresses (``HOST:PORT``) checked where they are parsed.

A node given a malformed `--server` used to retry for three minutes and then name another port,
and an unresolvable host took 14 s to be refused (issue 27, finding 6). `server_address`
refuses, at once and in one line, an address without a port, a port outside 1..65535, and a host
name that does not resolve within `RESOLVE_TIMEOUT_S` (a server that is not up yet is still
waited for: that is a connection refused, not a bad address).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import ipaddress
import socket

from privrec.shared.errors import ConfigError

RESOLVE_TIMEOUT_S = 5.0
"""How long a host name may take to resolve before the address is refused."""


def split_address(value: str, what: str = "--server") -> tuple[str, int]:
    """``HOST:PORT`` (or ``[IPv6]:PORT``) as (host, port), without resolving the host.

    Raises:
        ConfigError: no port, a port outside 1..65535, or no host; the message names `what`.
    """
    text = value.strip()
    host, sep, port_text = text.rpartition(":")
    if not sep or not host or not port_text:
        raise ConfigError(f"{what}: expected HOST:PORT, got {value!r}")
    if host.startswith("["):
        if not host.endswith("]"):
            raise ConfigError(f"{what}: expected [IPv6]:PORT, got {value!r}")
        host = host[1:-1]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ConfigError(f"{what}: {host!r} is not an IPv6 address, in {value!r}") from None
    elif ":" in host:
        raise ConfigError(f"{what}: an IPv6 address goes in brackets, [ADDR]:PORT, got {value!r}")
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise ConfigError(f"{what}: the port must be an integer in 1..65535, got {port_text!r}")
    return host, int(port_text)


def server_address(value: str, what: str = "--server") -> str:
    """`value` checked: well formed (`split_address`) and its host resolvable.

    Returns:
        The address as given (stripped), for gRPC's target.

    Raises:
        ConfigError: malformed, or the host does not resolve (within `RESOLVE_TIMEOUT_S`).
    """
    host, port = split_address(value, what)
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    try:
        pool.submit(socket.getaddrinfo, host, port, type=socket.SOCK_STREAM).result(
            timeout=RESOLVE_TIMEOUT_S
        )
    except concurrent.futures.TimeoutError:
        raise ConfigError(
            f"{what}: the host {host!r} did not resolve within {RESOLVE_TIMEOUT_S:g} s"
        ) from None
    except OSError as exc:
        raise ConfigError(
            f"{what}: the host {host!r} does not resolve ({exc.strerror or exc})"
        ) from None
    finally:
        pool.shutdown(wait=False)
    return value.strip()


def server_arg(value: str) -> str:
    """`server_address` as an argparse type (`--server HOST:PORT` of every command)."""
    try:
        return server_address(value)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--server: ")) from None


__all__ = ["RESOLVE_TIMEOUT_S", "server_address", "server_arg", "split_address"]
