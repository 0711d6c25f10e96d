"""Node keys, allow-lists, signatures, the replay window, certificates (`shared.identity`,
`shared.tls`, `server.auth`) and the request checks of `server.validation`."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from cryptography import x509

from privrec.server.auth import ClaimedNodes, NodeVerifier
from privrec.server.validation import parse, short
from privrec.server.wire import read_release_batch
from privrec.shared.errors import AuthenticationError, ConfigError, ValidationError
from privrec.shared.identity import (
    AUTH_METADATA_KEY,
    NODE_METADATA_KEY,
    AllowList,
    NodeIdentity,
    make_keys,
    request_digest,
)
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.tls import make_certs


def _private(path: Path) -> bool:
    return stat.S_IMODE(os.stat(path).st_mode) & 0o077 == 0


def test_keys_round_trip_and_are_private(tmp_path: Path) -> None:
    """`make_keys` writes 0600 keys and an allow-list that verifies their signatures."""
    allow = make_keys(tmp_path, ["shard-0", "adversary"])
    assert set(allow.nodes) == {"shard-0", "adversary"}
    key = tmp_path / "shard-0.key"
    assert _private(key) and _private(tmp_path)
    ident = NodeIdentity.load(key)
    assert ident.node_id == "shard-0"
    auth = ident.sign("Enroll", request_digest(b"abc"))
    loaded = AllowList.load(tmp_path / "allow-list.json")
    assert loaded.verify(auth, "Enroll", request_digest(b"abc"))
    assert not loaded.verify(auth, "Enroll", request_digest(b"abd"))
    assert not loaded.verify(auth, "Predict", request_digest(b"abc"))
    # re-running keeps existing keys (a node's identity does not change under it)
    make_keys(tmp_path, ["shard-0", "shard-1"])
    assert NodeIdentity.load(key).public_b64() == ident.public_b64()
    assert set(AllowList.load(tmp_path / "allow-list.json").nodes) == {
        "shard-0",
        "shard-1",
        "adversary",
    }


def test_a_world_readable_key_is_refused(tmp_path: Path) -> None:
    make_keys(tmp_path, ["n1"])
    (tmp_path / "n1.key").chmod(0o644)
    with pytest.raises(ConfigError, match="readable by other users"):
        NodeIdentity.load(tmp_path / "n1.key")


@pytest.mark.parametrize("bad", ["", "-x", "a/b", "x" * 65, "café", "a b"])
def test_node_names_are_checked(bad: str) -> None:
    with pytest.raises(ConfigError, match="node_id"):
        NodeIdentity.generate(bad)


def test_allow_list_errors_name_the_problem(tmp_path: Path) -> None:
    p = tmp_path / "a.json"
    p.write_text(json.dumps({"nodes": [{"node_id": "n", "ed25519": "!!"}]}))
    with pytest.raises(ConfigError, match="'n' has no valid Ed25519"):
        AllowList.load(p)
    p.write_text("{")
    with pytest.raises(ConfigError, match="not JSON"):
        AllowList.load(p)


def test_verifier_window_replay_and_expiry() -> None:
    """A signature is accepted once, within the window; a replay, a stale or future
    timestamp and a stranger are refused; remembered nonces expire with the window."""
    now = [1_000_000.0]
    ident = NodeIdentity.generate("n1")
    v = NodeVerifier(AllowList.of([ident]), window_s=60, clock=lambda: now[0])
    raw = b"request"

    def md(ts: float) -> list[tuple[str, bytes]]:
        auth = ident.sign("Submit", request_digest(raw), timestamp_ms=int(ts * 1000))
        return [(AUTH_METADATA_KEY, auth.SerializeToString())]

    good = md(now[0])
    assert v.unary("Submit", good, raw) == "n1"
    with pytest.raises(AuthenticationError, match="replayed"):
        v.unary("Submit", good, raw)
    with pytest.raises(AuthenticationError, match="timestamp"):
        v.unary("Submit", md(now[0] - 61), raw)
    with pytest.raises(AuthenticationError, match="timestamp"):
        v.unary("Submit", md(now[0] + 61), raw)
    with pytest.raises(AuthenticationError, match="allow-list"):
        other = NodeIdentity.generate("n2").sign("Submit", request_digest(raw))
        v.unary("Submit", [(AUTH_METADATA_KEY, other.SerializeToString())], raw)
    assert len(v._seen) == 1
    now[0] += 200  # past twice the window: the nonce is forgotten
    v.unary("Submit", md(now[0]), raw)
    assert len(v._seen) == 1


def test_signed_batch_splits_back_into_body_and_auth() -> None:
    """`sign_batch` appends field 2; the server gets the releases' bytes and the body back."""
    ident = NodeIdentity.generate("n1")
    rels = [pb.Release(user_id=f"u{i}", nonce="profile") for i in range(3)]
    body = pb.ReleaseBatch(releases=rels).SerializeToString()
    parts = read_release_batch(ident.sign_batch(body))
    assert parts.body == body
    assert parts.releases == [r.SerializeToString() for r in rels]
    assert parts.auth is not None
    v = NodeVerifier(AllowList.of([ident]))
    assert v.batch("SubmitStream", [], parts.body, parts.auth) == "n1"
    # the whole batch is a valid ReleaseBatch (protobuf concatenation merges)
    assert pb.ReleaseBatch.FromString(ident.sign_batch(body)).auth.node_id == "n1"


def test_insecure_mode_believes_the_claim() -> None:
    c = ClaimedNodes()
    assert c.unary("Enroll", [(NODE_METADATA_KEY, "shard-3")], b"") == "shard-3"
    assert c.unary("Enroll", [], b"") == ""


def test_certificates(tmp_path: Path) -> None:
    """A CA, server and broker certificates with loopback SANs, one client certificate per
    node; private keys 0600; nodes can be added later under the same CA."""
    make_certs(tmp_path, ["shard-0"])
    for name in ("ca", "server", "broker", "shard-0"):
        assert _private(tmp_path / f"{name}.key")
    server = x509.load_pem_x509_certificate((tmp_path / "server.pem").read_bytes())
    sans = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in sans.get_values_for_type(x509.DNSName)
    ca_before = (tmp_path / "ca.pem").read_bytes()
    server_before = (tmp_path / "server.pem").read_bytes()
    make_certs(tmp_path, ["shard-1"])
    assert (tmp_path / "ca.pem").read_bytes() == ca_before
    assert (tmp_path / "server.pem").read_bytes() == server_before
    node = x509.load_pem_x509_certificate((tmp_path / "shard-1.pem").read_bytes())
    assert node.issuer == server.issuer
    with pytest.raises(ConfigError, match="reserved"):
        make_certs(tmp_path, ["server"])


def test_parse_refuses_unknown_fields_at_any_depth() -> None:
    raw = pb.PredictRequest(items=[1]).SerializeToString() + b"\x0a\x03\xf8\x07\x01"
    with pytest.raises(ValidationError) as info:
        parse(pb.PredictRequest, raw, "PredictRequest")
    assert info.value.field == "PredictRequest.query"
    with pytest.raises(ValidationError, match="cannot be decoded as a Release"):
        parse(pb.Release, b"\xff\xff", "Release")


def test_short_cuts_long_echoes() -> None:
    s = short("x" * 1_000_000)
    assert len(s) < 80 and "(1000000 chars)" in s
    assert short("abc") == "'abc'"
