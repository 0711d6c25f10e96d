"""Who may read and write which control-plane topic: the broker's permissions by certificate.

Both brokers enforce the same policy, stated once here (docs/threat_model.md, "The control
plane"): the embedded amqtt broker through its plugin system (`sim.broker_acl`), Mosquitto through
the ACL file `privrec certs` writes beside the certificates (`mosquitto_acl`, with
``use_identity_as_username true``: the certificate's common name is the MQTT user name).

A connection's identity is the common name of its client certificate (mutual TLS): a node's
name (``shard-0``, ``adversary``, ``sim``, ``operator``) or ``privrec server``. Every topic lies
under ``privrec/{run_id}/``; the run level is a wildcard (one CA per run, or per study).

=====================  ==================================  =====================================
topic (after run)      written by                          read by
=====================  ==================================  =====================================
``phase``              the orchestrators (sim, operator)   every certificate
``models``             the server                          every certificate
``nodes/{n}/status``   the node whose name is ``n``        every certificate
``observations``       the server                          the adversary and the orchestrators
=====================  ==================================  =====================================

Anything else is refused. A subscription is allowed only when its filter cannot match a topic
the identity may not read (``privrec/+/#`` is refused to a shard: it covers the feed); the
embedded broker also checks each delivered message.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Literal

from privrec.shared.control.topics import TOPIC_ROOT

Action = Literal["read", "write"]
SERVER_IDENTITY = "privrec server"
"""The common name of the server's certificate (`shared.tls`)."""
ORCHESTRATORS = ("sim", "operator")
"""Identities that announce phases and may read the observation feed."""
FEED_READERS = ("adversary", *ORCHESTRATORS)
"""Identities that may read the observation feed (the adversary: what the aggregator saw)."""
SELF = "%u"
"""A topic level that stands for the identity itself (Mosquitto's pattern substitution)."""


@dataclasses.dataclass(frozen=True)
class TopicRule:
    """One permission: `action` on ``privrec/+/LEVELS``, for `identities` (empty: every one).

    A level of `SELF` matches only the identity's own name."""

    action: Action
    levels: tuple[str, ...]
    identities: tuple[str, ...] = ()

    def pattern(self) -> tuple[str, ...]:
        """The MQTT topic filter of this rule (`+` in the node's place)."""
        return (TOPIC_ROOT, "+", *self.levels)


POLICY = (
    TopicRule("read", ("phase",)),
    TopicRule("read", ("models",)),
    TopicRule("read", ("nodes", "+", "status")),
    TopicRule("write", ("nodes", SELF, "status")),
    TopicRule("write", ("phase",), ORCHESTRATORS),
    TopicRule("read", ("observations",), FEED_READERS),
    TopicRule("write", ("observations",), (SERVER_IDENTITY,)),
    TopicRule("write", ("models",), (SERVER_IDENTITY,)),
    TopicRule("write", ("nodes", "server", "status"), (SERVER_IDENTITY,)),
)
"""The permissions; everything not listed is refused."""


def _level_covers(rule: str, level: str, identity: str) -> bool:
    """Whether a rule level admits every topic level `level` (a name or a wildcard) stands for."""
    if rule == "+":
        return level != "#"
    if rule == SELF:
        return level == identity
    return level == rule


def permits(identity: str | None, action: Action, topic: str) -> bool:
    """Whether `identity` may `action` on `topic`: a concrete topic, or for "read" a
    subscription filter (allowed only if every topic it can match is readable).

    Args:
        identity: the common name of the connection's certificate (None: no certificate).
        action: "read" (subscribe, receive) or "write" (publish).
        topic: the topic or topic filter.
    """
    if identity is None:
        return False
    levels = tuple(topic.split("/"))
    for rule in POLICY:
        if rule.action != action or (rule.identities and identity not in rule.identities):
            continue
        pattern = rule.pattern()
        if len(pattern) == len(levels) and all(
            _level_covers(r, t, identity) for r, t in zip(pattern, levels, strict=True)
        ):
            return True
    return False


def mosquitto_acl() -> str:
    """The policy as a Mosquitto ACL file (`acl_file`, with ``use_identity_as_username true``
    on a listener that requires a client certificate)."""
    lines = [
        "# privrec control plane: topic permissions by client certificate (written by",
        "# `privrec certs`). Use with: require_certificate true, use_identity_as_username true,",
        "# acl_file <this file>. Everything not listed here is refused.",
        "",
    ]
    for rule in POLICY:
        if not rule.identities:
            lines.append(f"pattern {rule.action} {'/'.join(rule.pattern())}")
    by_identity: dict[str, list[TopicRule]] = {}
    for rule in POLICY:
        for identity in rule.identities:
            by_identity.setdefault(identity, []).append(rule)
    for identity, rules in by_identity.items():
        lines += ["", f"user {identity}"]
        lines += [f"topic {r.action} {'/'.join(r.pattern())}" for r in rules]
    return "\n".join(lines) + "\n"


MOSQUITTO_ACL = "mosquitto.acl"
MOSQUITTO_CONF = "mosquitto.conf"


def mosquitto_conf(tls_dir: Path, host: str = "127.0.0.1", port: int = 8883) -> str:
    """A Mosquitto configuration for a `privrec certs` directory: one mutual-TLS listener
    that takes each client's certificate name as its user name and enforces `mosquitto_acl`
    (``mosquitto -c DIR/mosquitto.conf``)."""
    d = tls_dir.resolve()
    return (
        f"# privrec: a Mosquitto broker for the certificates in {d} (written by `privrec certs`)\n"
        f"listener {port} {host}\n"
        "allow_anonymous false\npersistence false\n"
        f"cafile {d / 'ca.pem'}\ncertfile {d / 'broker.pem'}\nkeyfile {d / 'broker.key'}\n"
        "require_certificate true\nuse_identity_as_username true\n"
        f"acl_file {d / MOSQUITTO_ACL}\n"
    )


def write_mosquitto_files(tls_dir: Path) -> None:
    """`MOSQUITTO_ACL` and `MOSQUITTO_CONF` beside the certificates."""
    (tls_dir / MOSQUITTO_ACL).write_text(mosquitto_acl())
    (tls_dir / MOSQUITTO_CONF).write_text(mosquitto_conf(tls_dir))


__all__ = [
    "FEED_READERS",
    "MOSQUITTO_ACL",
    "MOSQUITTO_CONF",
    "ORCHESTRATORS",
    "POLICY",
    "SERVER_IDENTITY",
    "TopicRule",
    "mosquitto_acl",
    "mosquitto_conf",
    "permits",
    "write_mosquitto_files",
]
