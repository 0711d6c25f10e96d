"""Node identities: Ed25519 key pairs, the operator's allow-list, and request signatures.

In the spirit of Flower's node authentication, but per request: every client node (a client
shard, the adversary's sybil clients) holds an Ed25519 key pair made with `cryptography`, the
operator lists the nodes the server accepts in an allow-list (`privrec keys`, or `privrec sim`
on its own), and each request that acts for a user is signed by its node:

* a unary call (`Enroll`, `Submit`, `Predict`, `Recommend`) carries a `NodeAuth` in the metadata
  key ``privrec-auth-bin`` (`NodeSigner`, a client interceptor, adds it);
* a `SubmitStream` carries one `NodeAuth` per `ReleaseBatch`, in the batch's field 2, so a batch
  of many users costs one signature (`sign_batch`).

The signed bytes (`signing_bytes`) bind the method, the node, a timestamp, a random nonce and the
SHA-256 of the request exactly as it travels (for a batch: its bytes without the `auth` field),
so a signature cannot be moved to another method or request, and the server's replay window
(`privrec.server.auth.NodeVerifier`) refuses it twice or late.

Nothing here is a per-user secret: a user belongs to the node that enrolled her
(`privrec.server.enrollment`), and a node proves who it is with its key, which never leaves it.

Files (`save_identity`, `AllowList.save`): ``NODE.key`` (PKCS#8 PEM, created 0600), ``NODE.pub``
(the raw public key, base64) and ``allow-list.json``::

    {"version": 1, "nodes": [{"node_id": "shard-0", "ed25519": "<base64 of 32 bytes>"}],
     "control": [{"node_id": "sim", "ed25519": "<base64 of 32 bytes>"}]}

``control`` lists the keys that sign the run's control messages (the orchestrator's phase
announcements, `shared.control.announcements`): the server publishes them in the run's public
configuration, and they act for no user (a control key signs no user request).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import dataclasses
import hashlib
import json
import os
import re
import secrets
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import grpc
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from privrec.shared.errors import ConfigError
from privrec.shared.files import write_private
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb

AUTH_METADATA_KEY = "privrec-auth-bin"
"""Metadata key of a unary call's `NodeAuth` (binary: gRPC base64s it on the wire)."""
NODE_METADATA_KEY = "privrec-node"
"""Metadata key of an unsigned node claim (`--insecure` runs only: anyone can claim anything)."""
SIGNING_CONTEXT = b"privrec-auth-v1"
NONCE_BYTES = 16
ALLOW_LIST_NAME = "allow-list.json"
SIGNED_METHODS = frozenset(
    {
        "Enroll",
        "EnrollBatch",
        "Submit",
        "SubmitStream",
        "Predict",
        "PredictBatch",
        "Recommend",
        "ListUsers",
        "GetTranscript",
    }
)
"""The Aggregator methods that act for a user (or read what only a given node may: its users'
state, the transcript) and so must be signed by the node."""

_NODE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_TAG_AUTH = (2 << 3) | 2  # ReleaseBatch.auth: field 2, wire type LEN


def check_node_id(node_id: str) -> str:
    """`node_id` if it is a valid node name (1–64 of ``A-Za-z0-9._-``, not starting with a
    punctuation mark), else ConfigError."""
    if not isinstance(node_id, str) or not _NODE_ID.match(node_id):
        shown = node_id[:70] if isinstance(node_id, str) else node_id
        raise ConfigError(
            f"node_id: must be 1-64 characters of A-Z a-z 0-9 . _ - (not starting with . _ -), "
            f"got {shown!r}"
        )
    return node_id


def signing_bytes(
    method: str, node_id: str, timestamp_ms: int, nonce: bytes, digest: bytes
) -> bytes:
    """The exact bytes a node signs for one request.

    Args:
        method: the short method name (``"Enroll"``, ``"SubmitStream"``, ...).
        node_id: the signer.
        timestamp_ms: the signer's clock, milliseconds since the epoch.
        nonce: `NONCE_BYTES` random bytes.
        digest: SHA-256 of the request's bytes (`request_digest`).
    """
    return b"\x00".join(
        (
            SIGNING_CONTEXT,
            method.encode(),
            node_id.encode(),
            timestamp_ms.to_bytes(8, "big", signed=True),
            nonce,
            digest,
        )
    )


def request_digest(raw: bytes) -> bytes:
    """SHA-256 of a request's serialized bytes."""
    return hashlib.sha256(raw).digest()


@dataclasses.dataclass(frozen=True)
class NodeIdentity:
    """A node's name and private key.

    Attributes:
        node_id: the node's name in the allow-list (e.g. ``shard-0``).
        private_key: its Ed25519 private key (never sent anywhere).
    """

    node_id: str
    private_key: Ed25519PrivateKey = dataclasses.field(repr=False)

    def __post_init__(self) -> None:
        check_node_id(self.node_id)

    @classmethod
    def generate(cls, node_id: str) -> NodeIdentity:
        """A fresh key pair for `node_id`."""
        return cls(node_id, Ed25519PrivateKey.generate())

    @classmethod
    def load(cls, path: str | Path, node_id: str | None = None) -> NodeIdentity:
        """Read ``NODE.key`` (PKCS#8 PEM); the node id is the file's stem unless given.

        Raises:
            ConfigError: the file is missing, unreadable, not an Ed25519 key, or readable by
                other users (it must be 0600 or stricter).
        """
        path = Path(path)
        try:
            data = path.read_bytes()
            mode = path.stat().st_mode
        except OSError as exc:
            raise ConfigError(f"node key: cannot read {path}: {exc.strerror or exc}") from None
        if mode & 0o077:
            raise ConfigError(
                f"node key: {path} is readable by other users (mode {mode & 0o777:o}); chmod 600 it"
            )
        try:
            key = serialization.load_pem_private_key(data, password=None)
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"node key: {path} is not a PEM private key ({exc})") from None
        if not isinstance(key, Ed25519PrivateKey):
            raise ConfigError(f"node key: {path} is not an Ed25519 key")
        return cls(node_id if node_id is not None else path.stem, key)

    def public_key(self) -> Ed25519PublicKey:
        """The node's Ed25519 public key."""
        return self.private_key.public_key()

    def public_b64(self) -> str:
        """The raw 32-byte public key, base64 (as the allow-list holds it)."""
        return public_b64(self.public_key())

    def sign(
        self,
        method: str,
        digest: bytes,
        *,
        timestamp_ms: int | None = None,
        nonce: bytes | None = None,
    ) -> pb.NodeAuth:
        """A `NodeAuth` for one request whose bytes hash to `digest`."""
        ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
        nonce = secrets.token_bytes(NONCE_BYTES) if nonce is None else nonce
        sig = self.private_key.sign(signing_bytes(method, self.node_id, ts, nonce, digest))
        return pb.NodeAuth(node_id=self.node_id, timestamp_ms=ts, nonce=nonce, signature=sig)

    def metadata(self, method: str, raw: bytes) -> tuple[tuple[str, bytes], ...]:
        """The call metadata that authenticates a unary request with bytes `raw`."""
        auth = self.sign(method, request_digest(raw))
        return ((AUTH_METADATA_KEY, auth.SerializeToString()),)

    def sign_batch(self, body: bytes, method: str = "SubmitStream") -> bytes:
        """A serialized `ReleaseBatch` (`body`, without `auth`) with its signature appended
        as field 2 (protobuf concatenation is a merge, so the result is one valid batch); an
        `EnrollRequestBatch` likewise with `method` "EnrollBatch"."""
        auth = self.sign(method, request_digest(body)).SerializeToString()
        return body + bytes([_TAG_AUTH]) + _varint(len(auth)) + auth


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def save_identity(identity: NodeIdentity, directory: str | Path) -> Path:
    """Write ``NODE.key`` (0600) and ``NODE.pub`` into `directory`; returns the key's path."""
    directory = Path(directory)
    key = directory / f"{identity.node_id}.key"
    pem = identity.private_key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    write_private(key, pem)
    (directory / f"{identity.node_id}.pub").write_text(identity.public_b64() + "\n")
    return key


def public_keys(
    entries: Mapping[str, str], what: str = "allow-list"
) -> dict[str, Ed25519PublicKey]:
    """``{node_id: base64 of the raw public key}`` decoded.

    Raises:
        ConfigError: a bad node id or key, naming it (and `what` holds it).
    """
    keys: dict[str, Ed25519PublicKey] = {}
    for node_id, b64 in entries.items():
        check_node_id(node_id)
        try:
            raw = base64.b64decode(b64, validate=True)
            keys[node_id] = Ed25519PublicKey.from_public_bytes(raw)
        except (binascii.Error, ValueError, TypeError):
            raise ConfigError(
                f"{what}: node {node_id!r} has no valid Ed25519 public key (base64 of 32 bytes)"
            ) from None
    return keys


def public_b64(key: Ed25519PublicKey) -> str:
    """The raw 32-byte public key, base64."""
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return base64.b64encode(raw).decode()


@dataclasses.dataclass(frozen=True)
class AllowList:
    """The operator's list of the nodes the server accepts, with their public keys, and the
    control keys that sign the run's control messages (they act for no user)."""

    nodes: Mapping[str, Ed25519PublicKey]
    control: Mapping[str, Ed25519PublicKey] = dataclasses.field(default_factory=dict)

    @classmethod
    def of(
        cls, identities: Iterable[NodeIdentity], control: Iterable[NodeIdentity] = ()
    ) -> AllowList:
        """The allow-list of these nodes (and of the control-plane signers)."""
        return cls(
            {i.node_id: i.public_key() for i in identities},
            {i.node_id: i.public_key() for i in control},
        )

    @classmethod
    def from_public(
        cls, entries: Mapping[str, str], control: Mapping[str, str] | None = None
    ) -> AllowList:
        """From ``{node_id: base64 public key}`` (and the control keys alike).

        Raises:
            ConfigError: a bad node id or key, naming it; a name both a node and a control key.
        """
        nodes, keys = public_keys(entries), public_keys(control or {}, "allow-list control")
        both = sorted(set(nodes) & set(keys))
        if both:
            raise ConfigError(
                f"allow-list: {both} both a client node and a control key; a control key "
                "acts for no user (give the orchestrator its own name)"
            )
        return cls(nodes, keys)

    def control_public(self) -> dict[str, str]:
        """The control keys as ``{node_id: base64}`` (`PublicRunConfig.control_keys`)."""
        return {node: public_b64(key) for node, key in sorted(self.control.items())}

    @classmethod
    def load(cls, path: str | Path) -> AllowList:
        """Read ``allow-list.json``.

        Raises:
            ConfigError: missing, unreadable or malformed, naming the problem.
        """
        path = Path(path)
        try:
            doc = json.loads(path.read_text())
        except OSError as exc:
            raise ConfigError(f"allow-list: cannot read {path}: {exc.strerror or exc}") from None
        except json.JSONDecodeError as exc:
            raise ConfigError(f"allow-list: {path} is not JSON ({exc})") from None
        entries = doc.get("nodes") if isinstance(doc, dict) else None
        if not isinstance(entries, list):
            raise ConfigError(f"allow-list: {path} needs a list under 'nodes'")
        control = doc.get("control", [])
        if not isinstance(control, list):
            raise ConfigError(f"allow-list: {path} needs a list under 'control' (if any)")
        return cls.from_public(_entries("nodes", entries), _entries("control", control))

    def to_json(self) -> dict[str, Any]:
        """The allow-list as JSON: node ids and base64 public keys."""

        def rows(keys: Mapping[str, Ed25519PublicKey]) -> list[dict[str, str]]:
            return [{"node_id": n, "ed25519": public_b64(k)} for n, k in sorted(keys.items())]

        out: dict[str, Any] = {"version": 1, "nodes": rows(self.nodes)}
        if self.control:
            out["control"] = rows(self.control)
        return out

    def save(self, path: str | Path) -> None:
        """Write the allow-list atomically (a temporary file, then a rename)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=2) + "\n")
        os.replace(tmp, path)

    def verify(self, auth: pb.NodeAuth, method: str, digest: bytes) -> bool:
        """Whether `auth` is a valid signature by an allowed node of this request."""
        key = self.nodes.get(auth.node_id)
        if key is None:
            return False
        try:
            key.verify(
                auth.signature,
                signing_bytes(method, auth.node_id, auth.timestamp_ms, auth.nonce, digest),
            )
        except InvalidSignature:
            return False
        return True


def _entries(what: str, rows: list[Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for i, e in enumerate(rows):
        if not isinstance(e, dict) or not isinstance(e.get("node_id"), str):
            raise ConfigError(f"allow-list: {what}[{i}] needs 'node_id' and 'ed25519'")
        out[e["node_id"]] = str(e.get("ed25519", ""))
    return out


def make_keys(
    directory: str | Path, nodes: Sequence[str], control: Sequence[str] = ()
) -> AllowList:
    """`privrec keys`: a key pair per node in `directory` (kept if already there) and the
    allow-list of every ``*.pub`` in it (``allow-list.json``): the names in `control` (and those
    listed as control keys before) as control keys, every other as a client node; returns the
    allow-list."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, 0o700)
    for node in (*nodes, *control):
        check_node_id(node)
        if not (directory / f"{node}.key").exists():
            save_identity(NodeIdentity.generate(node), directory)
    known = set(control)
    with contextlib.suppress(ConfigError):
        known |= set(AllowList.load(directory / ALLOW_LIST_NAME).control)
    entries = {p.stem: p.read_text().strip() for p in sorted(directory.glob("*.pub"))}
    allow = AllowList.from_public(
        {n: k for n, k in entries.items() if n not in known},
        {n: k for n, k in entries.items() if n in known},
    )
    allow.save(directory / ALLOW_LIST_NAME)
    return allow


# ------------------------------------------------------------------------- client side
def _method_of(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def _request_bytes(request: Any) -> bytes:
    return request if isinstance(request, bytes) else bytes(request.SerializeToString())


class _Signer:
    def __init__(self, identity: NodeIdentity | None, claim: str = "") -> None:
        self.identity = identity
        self.claim = claim  # insecure runs: an unsigned node name

    @staticmethod
    def _details(details: Any, extra: Sequence[tuple[str, str | bytes]]) -> Any:
        md = grpc.aio.Metadata(*(details.metadata or ()), *extra)
        return grpc.aio.ClientCallDetails(
            details.method, details.timeout, md, details.credentials, details.wait_for_ready
        )


class _UnarySigner(_Signer, grpc.aio.UnaryUnaryClientInterceptor):
    async def intercept_unary_unary(
        self, continuation: Any, client_call_details: Any, request: Any
    ) -> Any:
        method = _method_of(_str(client_call_details.method))
        extra: Sequence[tuple[str, str | bytes]] = ()
        if method == "EnrollBatch":  # signed in its field 2 (`sign_batch`), like a ReleaseBatch
            if self.identity is None and self.claim:
                extra = ((NODE_METADATA_KEY, self.claim),)
                client_call_details = self._details(client_call_details, extra)
        elif method in SIGNED_METHODS:
            if self.identity is not None:
                extra = self.identity.metadata(method, _request_bytes(request))
            elif self.claim:
                extra = ((NODE_METADATA_KEY, self.claim),)
            client_call_details = self._details(client_call_details, extra)
        return await continuation(client_call_details, request)


class _StreamSigner(_Signer, grpc.aio.StreamUnaryClientInterceptor):
    async def intercept_stream_unary(
        self, continuation: Any, client_call_details: Any, request_iterator: Any
    ) -> Any:
        if _method_of(_str(client_call_details.method)) == "SubmitStream":
            if self.identity is not None:
                request_iterator = _signed_batches(self.identity, request_iterator)
            elif self.claim:
                extra = ((NODE_METADATA_KEY, self.claim),)
                client_call_details = self._details(client_call_details, extra)
        return await continuation(client_call_details, request_iterator)


def signing_interceptors(identity: NodeIdentity | None, claim: str = "") -> list[Any]:
    """grpc.aio client interceptors that sign every user request of a channel as `identity`
    (`SIGNED_METHODS`; other calls pass untouched): unary requests get the metadata
    ``privrec-auth-bin``, each `ReleaseBatch` of a SubmitStream its `auth` field. Without an
    identity they name the node `claim` unsigned (`--insecure` runs).

    ``grpc.aio.secure_channel(target, creds, interceptors=signing_interceptors(identity))``
    """
    return [_UnarySigner(identity, claim), _StreamSigner(identity, claim)]


def _str(method: str | bytes) -> str:
    return method.decode() if isinstance(method, bytes) else method


async def _signed_batches(identity: NodeIdentity, batches: Any) -> Any:
    if hasattr(batches, "__aiter__"):
        async for b in batches:
            yield _signed_batch(identity, b)
    else:
        for b in batches:
            yield _signed_batch(identity, b)


def _signed_batch(identity: NodeIdentity, batch: Any) -> Any:
    if isinstance(batch, bytes):
        return identity.sign_batch(batch)
    body = pb.ReleaseBatch(releases=batch.releases).SerializeToString()
    out = pb.ReleaseBatch()
    out.MergeFromString(identity.sign_batch(body))
    return out


__all__ = [
    "ALLOW_LIST_NAME",
    "AUTH_METADATA_KEY",
    "NODE_METADATA_KEY",
    "SIGNED_METHODS",
    "AllowList",
    "NodeIdentity",
    "check_node_id",
    "make_keys",
    "public_b64",
    "public_keys",
    "request_digest",
    "save_identity",
    "signing_bytes",
    "signing_interceptors",
    "write_private",
]
