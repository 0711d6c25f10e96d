"""Control messages: their JSON payloads, and the orchestrator's signature on them.

A phase announcement (``privrec/{run_id}/phase``, retained) is what makes every node act: a
forged one made honest shards skip their releases (issue 27, finding 2). So in a secure run it
is signed by the orchestrator's Ed25519 control key (`privrec sim`'s ``sim``, or the operator's
``operator`` for a run by hand: the allow-list's ``control`` entries), and every node verifies it
against the control keys of the run's public configuration (`PublicRunConfig.control_keys`, which
it reads from the server over mutual TLS) before it believes it:

* the signature covers a context string, the topic (so the run and the kind of message) and the
  canonical JSON of every other key (phase, seq, ts, node, info): it cannot be moved to another
  run, topic or content;
* ``node`` names the signer, whose key must be among the run's control keys;
* ``seq`` must rise: a reader drops an announcement whose seq is not above the last one it
  believed, so a replayed older announcement of the same run changes nothing.

Payload: ``{"phase", "seq", "ts", "node", **info, "sig": base64(Ed25519 signature)}``.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

import aiomqtt
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from privrec.shared.identity import NodeIdentity
from privrec.shared.protocol import PHASES

logger = logging.getLogger(__name__)

CONTROL_CONTEXT = b"privrec-control-v1"
SIGNATURE_KEY = "sig"
ControlKeys = Mapping[str, Ed25519PublicKey]
"""The run's control keys: signer (node name) → Ed25519 public key."""


@dataclasses.dataclass(frozen=True, slots=True)
class Phase:
    """A phase announcement as seen on ``privrec/{run_id}/phase``.

    Attributes:
        name: one of `PHASES`.
        seq: the announcer's sequence number, 1 for the first announcement of the run.
        ts: wall-clock time of the announcement (seconds since the epoch).
        node: the announcing node (in a secure run, the signer).
        info: any further keys of the announcement.
    """

    name: str
    seq: int
    ts: float
    node: str = ""
    info: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def index(self) -> int:
        """Position of the phase in `PHASES`."""
        return PHASES.index(self.name)


def encode(obj: Mapping[str, Any]) -> bytes:
    """Canonical JSON (sorted keys, no spaces), UTF-8."""
    return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode("utf-8")


def decode_json(message: aiomqtt.Message) -> dict[str, Any] | None:
    """Decode a JSON object payload; log and return None for anything else (or a cleared topic)."""
    if not message.payload:
        return None  # an empty retained message clears the topic
    try:
        obj = json.loads(bytes(message.payload))
    except (ValueError, TypeError):
        logger.warning("ignoring non-JSON payload on %s", message.topic.value)
        return None
    if not isinstance(obj, dict):
        logger.warning("ignoring non-object JSON payload on %s", message.topic.value)
        return None
    return obj


def check_reserved_keys(info: Mapping[str, Any], reserved: tuple[str, ...]) -> None:
    """Raise ValueError if `info` uses one of the `reserved` keys."""
    clash = sorted(set(info) & set(reserved))
    if clash:
        msg = f"announcement keys {clash} are reserved ({', '.join(reserved)})"
        raise ValueError(msg)


def signing_bytes(topic: str, body: Mapping[str, Any]) -> bytes:
    """The bytes the orchestrator signs for a control message `body` on `topic`."""
    return b"\x00".join((CONTROL_CONTEXT, topic.encode(), encode(body)))


def sign(identity: NodeIdentity, topic: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """`body` (whose "node" must be the signer) with its signature under `SIGNATURE_KEY`."""
    if body.get("node") != identity.node_id:
        msg = (
            f"a control message names its signer: node {body.get('node')!r} != {identity.node_id!r}"
        )
        raise ValueError(msg)
    signature = identity.private_key.sign(signing_bytes(topic, body))
    return {**body, SIGNATURE_KEY: base64.b64encode(signature).decode()}


def verified(keys: ControlKeys, topic: str, obj: dict[str, Any]) -> bool:
    """Whether `obj` (a decoded control message, which keeps its signature) is signed by one
    of `keys` for `topic`."""
    raw = obj.get(SIGNATURE_KEY)
    key = keys.get(str(obj.get("node", "")))
    if key is None or not isinstance(raw, str):
        return False
    try:
        signature = base64.b64decode(raw, validate=True)
        body = {k: v for k, v in obj.items() if k != SIGNATURE_KEY}
        key.verify(signature, signing_bytes(topic, body))
    except (binascii.Error, ValueError, InvalidSignature):
        return False
    return True


def phase_reader(topic: str, keys: ControlKeys | None) -> Callable[[aiomqtt.Message], Phase | None]:
    """A converter of phase messages to `Phase`, for one feed: it drops malformed messages,
    unknown phases, messages not above the last seq it returned, and, unless `keys` is None
    (an insecure run), every message not signed by one of `keys`."""
    last_seq = 0

    def convert(message: aiomqtt.Message) -> Phase | None:
        nonlocal last_seq
        obj = decode_json(message)
        if obj is None:
            return None
        if keys is not None and not verified(keys, topic, obj):
            logger.warning(
                "ignoring a phase announcement on %s not signed by the run's orchestrator "
                "(node %r, phase %r)",
                message.topic.value,
                str(obj.get("node", ""))[:40],
                str(obj.get("phase", ""))[:40],
            )
            return None
        obj.pop(SIGNATURE_KEY, None)
        try:
            name = str(obj.pop("phase"))
            seq = int(obj.pop("seq"))
            ts = float(obj.pop("ts"))
        except (KeyError, TypeError, ValueError):
            logger.warning("ignoring malformed phase announcement on %s", message.topic.value)
            return None
        if name not in PHASES:
            logger.warning("ignoring unknown phase %r on %s", name[:40], message.topic.value)
            return None
        if seq <= last_seq:
            return None
        last_seq = seq
        return Phase(name, seq, ts, str(obj.pop("node", "")), obj)

    return convert


__all__ = [
    "CONTROL_CONTEXT",
    "ControlKeys",
    "Phase",
    "check_reserved_keys",
    "decode_json",
    "encode",
    "phase_reader",
    "sign",
    "signing_bytes",
    "verified",
]
