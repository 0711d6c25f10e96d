"""Topic permissions by certificate on the embedded amqtt broker: an amqtt topic plugin.

The policy is `shared.control.acl` (the same one Mosquitto enforces from the ACL file `privrec
certs` writes). amqtt's own ACL plugin keys on the MQTT user name, which a client chooses; this
plugin keys on the common name of the client certificate the TLS handshake verified. The
embedded broker accepts every connection itself (`sim.broker.serve`) and records each peer's
certificate name here (`CertificateNames`) under the peer's (address, port), which amqtt copies
into the session; the plugin looks the session up there. A session without a recorded name
(a plaintext broker, or a connection already closed) may do nothing.
"""

from __future__ import annotations

import dataclasses
import ssl
from typing import Any

from amqtt.contexts import Action  # type: ignore[import-untyped,unused-ignore]
from amqtt.plugins.base import BaseTopicPlugin  # type: ignore[import-untyped,unused-ignore]

from privrec.shared.control.acl import permits

_ACTIONS = {Action.PUBLISH: "write", Action.SUBSCRIBE: "read", Action.RECEIVE: "read"}


class CertificateNames:
    """The certificate common name of every open connection, by peer (address, port)."""

    names: dict[tuple[str, int], str] = {}  # noqa: RUF012  # one broker per process

    @classmethod
    def record(cls, peer: tuple[str, int], ssl_object: ssl.SSLObject | None) -> None:
        """Remember the certificate name of the connection from `peer`."""
        name = common_name(ssl_object.getpeercert() if ssl_object is not None else None)
        if name is not None:
            cls.names[peer] = name

    @classmethod
    def forget(cls, peer: tuple[str, int]) -> None:
        """Forget the connection from `peer`."""
        cls.names.pop(peer, None)


def common_name(cert: dict[str, Any] | None) -> str | None:
    """The subject's common name of a certificate as `ssl.SSLSocket.getpeercert()` gives it."""
    for rdn in (cert or {}).get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None


class CertificateTopicPlugin(BaseTopicPlugin):  # type: ignore[misc,unused-ignore]
    """amqtt topic plugin: `shared.control.acl.permits` for the session's certificate name."""

    @dataclasses.dataclass
    class Config:
        """No options: the policy is `shared.control.acl.POLICY`."""

    async def topic_filtering(
        self, *, session: Any = None, topic: str | None = None, action: Any = None
    ) -> bool:
        """Whether the connection's certificate name may do `action` on `topic`."""
        if session is None or topic is None or action not in _ACTIONS:
            return False
        peer = (session.remote_address, session.remote_port)
        identity = CertificateNames.names.get(peer)
        allowed = permits(identity, _ACTIONS[action], topic)  # type: ignore[arg-type]
        if not allowed:
            self.context.logger.warning(
                "refused: %s (certificate %r) may not %s %s", session.client_id, identity,
                action, topic,
            )  # fmt: skip
        return allowed


__all__ = ["CertificateNames", "CertificateTopicPlugin", "common_name"]
