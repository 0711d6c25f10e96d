"""Used nonces persist (issue 27, finding 6): `UsedNonces` and a `NodeVerifier` built on it."""

from __future__ import annotations

import stat
import time
from pathlib import Path

import pytest

from privrec.server.auth import NodeVerifier, UsedNonces
from privrec.shared.errors import AuthenticationError
from privrec.shared.identity import AllowList, NodeIdentity

WINDOW = 60.0


def test_a_second_verifier_on_the_same_file_refuses_the_first_ones_nonces(tmp_path: Path) -> None:
    node = NodeIdentity.generate("n1")
    allow = AllowList.of([node])
    now = [time.time()]
    raw = b"request"
    md = node.metadata("Submit", raw)
    first = NodeVerifier(allow, window_s=WINDOW, clock=lambda: now[0],
                         used=UsedNonces(tmp_path / "nonces.sqlite"))  # fmt: skip
    assert first.unary("Submit", md, raw) == "n1"
    now[0] += 10
    restarted = NodeVerifier(allow, window_s=WINDOW, clock=lambda: now[0],
                             used=UsedNonces(tmp_path / "nonces.sqlite"))  # fmt: skip
    with pytest.raises(AuthenticationError, match="replayed"):
        restarted.unary("Submit", md, raw)
    assert restarted.unary("Submit", node.metadata("Submit", raw), raw) == "n1"


def test_nonces_older_than_the_window_are_forgotten(tmp_path: Path) -> None:
    used = UsedNonces(tmp_path / "nonces.sqlite")
    for i in range(UsedNonces.EXPIRE_EVERY):
        used.add("n", i.to_bytes(16, "big"), ts=float(i), horizon=float(i) - 10)
    assert [ts for ts, _, _ in used.since(0.0)] == [
        float(i) for i in range(UsedNonces.EXPIRE_EVERY - 11, UsedNonces.EXPIRE_EVERY)
    ]
    assert len(list(used.since(1e9))) == 0
    assert stat.S_IMODE((tmp_path / "nonces.sqlite").stat().st_mode) == 0o600
