"""Control-plane topics and broker URLs: the one place MQTT topics are built.

Topics (all QoS 1; every payload except observations is UTF-8 JSON), see `shared.control.plane`:
``privrec/{run_id}/phase``, ``privrec/{run_id}/nodes/{node}/status``,
``privrec/{run_id}/models`` and ``privrec/{run_id}/observations``.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from privrec.shared.errors import ConfigError, PrivrecError

TOPIC_ROOT = "privrec"
DEFAULT_PORT = 1883
DEFAULT_TLS_PORT = 8883
TLS_SCHEME = "mqtts"
_FORBIDDEN_IN_LEVEL = ("/", "+", "#", "\x00")


class ControlPlaneError(PrivrecError):
    """The MQTT broker is unreachable, refused us, or the connection was lost.

    Attributes:
        url: the broker URL the control plane was built from.
    """

    def __init__(self, message: str, *, url: str = "") -> None:
        super().__init__(message)
        self.url = url


# --------------------------------------------------------------------------- URLs and topics


def parse_mqtt_url(url: str) -> tuple[str, int]:
    """Split ``mqtt://host:port`` into ``(host, port)``.

    The port defaults to 1883 when omitted. Credentials, paths, queries and other schemes are
    rejected rather than silently ignored.

    Args:
        url: the broker URL.

    Returns:
        The host (IPv6 literals without brackets) and the port.

    Raises:
        ConfigError: the URL is malformed; the message names the bad part and echoes the URL.
    """
    if not isinstance(url, str) or not url:
        msg = f"MQTT URL must be a non-empty string like 'mqtt://host:1883', got {url!r}"
        raise ConfigError(msg)
    parts = urlsplit(url)
    if parts.scheme not in ("mqtt", TLS_SCHEME):
        msg = f"MQTT URL scheme must be 'mqtt' or 'mqtts' (TLS), got {parts.scheme!r} in {url!r}"
        raise ConfigError(msg)
    if parts.username is not None or parts.password is not None:
        msg = f"MQTT URL must not carry credentials (user:password@), got {url!r}"
        raise ConfigError(msg)
    if not parts.hostname:
        msg = f"MQTT URL has no host, got {url!r} (expected 'mqtt://host:port')"
        raise ConfigError(msg)
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        msg = f"MQTT URL must not have a path, query or fragment, got {url!r}"
        raise ConfigError(msg)
    try:
        port = parts.port
    except ValueError:
        raw = parts.netloc.rpartition(":")[2]
        msg = f"MQTT URL port must be an integer in 1..65535, got {raw!r} in {url!r}"
        raise ConfigError(msg) from None
    if port == 0:
        msg = f"MQTT URL port must be an integer in 1..65535, got 0 in {url!r}"
        raise ConfigError(msg)
    default = DEFAULT_TLS_PORT if parts.scheme == TLS_SCHEME else DEFAULT_PORT
    return parts.hostname, default if port is None else port


def is_tls_url(url: str) -> bool:
    """Whether a broker URL asks for TLS (``mqtts://``)."""
    return urlsplit(url).scheme == TLS_SCHEME


def check_level(name: str, value: str) -> None:
    """Raise ConfigError unless `value` is usable as one MQTT topic level."""
    if not isinstance(value, str) or not value:
        msg = f"`{name}` must be a non-empty string, got {value!r}"
        raise ConfigError(msg)
    bad = [c for c in _FORBIDDEN_IN_LEVEL if c in value]
    if bad or value.startswith("$"):
        msg = f"`{name}` must not contain '/', '+', '#', NUL or start with '$', got {value!r}"
        raise ConfigError(msg)


def topic_for(run_id: str, *parts: str) -> str:
    """Build a control-plane topic: ``privrec/{run_id}/{part}/{part}...``.

    This is the only place topics are built. `parts` are joined with "/" and may be the
    single-level wildcard "+" (used for subscription filters such as the node statuses).

    Args:
        run_id: the run's identifier; one topic level (no '/', '+', '#').
        *parts: further topic levels, e.g. ``"nodes", "shard-0", "status"``.

    Returns:
        The topic string.

    Raises:
        ConfigError: `run_id` or a part is empty or contains a forbidden character.
    """
    check_level("run_id", run_id)
    for part in parts:
        if part != "+":
            check_level("topic part", part)
    return "/".join((TOPIC_ROOT, run_id, *parts))


__all__ = [
    "DEFAULT_PORT",
    "DEFAULT_TLS_PORT",
    "TOPIC_ROOT",
    "ControlPlaneError",
    "check_level",
    "is_tls_url",
    "parse_mqtt_url",
    "topic_for",
]
