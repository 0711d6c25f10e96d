"""A new `Aggregator` over the store of a dead one takes up where it stopped (issue 12 (8)).

In one process: the store a server left behind (closed without any clean-up, as after SIGKILL)
is opened by a new core, which must answer, publish and count exactly as the old one would have.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from privrec.server.aggregator import Aggregator
from privrec.server.models import PPCF
from privrec.server.store import Store
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from tests.grpc_helpers import one_tier_spec
from tests.integration.test_protocol_grpc import N_ITEMS, release

RUN, ADMIN = "t-run", "admin"
USERS = [f"u{i}" for i in range(12)]


def phase(core: Aggregator, name: str) -> pb.RunStatus:
    return core.set_phase(pb.SetPhaseRequest(run_id=RUN, admin_token=ADMIN, phase=name))


def collected(path: Path) -> tuple[Aggregator, dict[str, str]]:
    core = Aggregator(one_tier_spec(RUN, ADMIN, N_ITEMS), Store(path))
    phase(core, "enroll")
    tokens = {}
    for u in USERS:
        req = pb.EnrollRequest(run_id=RUN, user_id=u, tier=pb.TIER_PRIVATE)
        tokens[u] = core.enroll(req.SerializeToString(), "shard-0").token
    phase(core, "collect")
    core.submit_many(
        [release(u, tokens[u], i).SerializeToString() for i, u in enumerate(USERS)],
        node="shard-0",
    )
    return core, tokens


def query(tokens: dict[str, str]) -> bytes:
    q = release("u3", tokens["u3"], 5, nonce="query-0", purpose=pb.PURPOSE_QUERY)
    return pb.PredictRequest(query=q, items=[0, 4, 9]).SerializeToString()


def test_a_server_killed_during_the_fit_fits_again_and_answers_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Phase "train" is stored before the fit; a core that died in the fit leaves no model, so
    the next one `needs_training`, `resume`s, and answers exactly as an uninterrupted one."""
    ref, tokens = collected(tmp_path / "ref.sqlite")
    phase(ref, "train")
    phase(ref, "serve")
    expected = ref.predict(query(tokens), "shard-0")

    core, tokens = collected(tmp_path / "s.sqlite")

    def crash(self: PPCF, *args: object, **kwargs: object) -> PPCF:
        raise SystemExit("killed mid-fit")

    with monkeypatch.context() as m:
        m.setattr(PPCF, "fit", crash)
        with pytest.raises(SystemExit):
            phase(core, "train")
    assert core.phase == "train" and not core.trained  # refused releases from here on
    # the process dies: nothing is closed or flushed
    again = Aggregator(one_tier_spec(RUN, ADMIN, N_ITEMS), Store(tmp_path / "s.sqlite"))
    assert again.phase == "train" and again.needs_training()
    again.resume()
    assert again.trained and not again.needs_training()
    phase(again, "serve")
    got = again.predict(query(tokens), "shard-0")
    np.testing.assert_array_equal(got.scores, expected.scores)
    assert list(got.n_neighbours) == list(expected.n_neighbours)


def test_a_restart_in_serve_restores_the_model_counters_and_owners(tmp_path: Path) -> None:
    """After the fit the model, the counters, the owners and the phase are stored: a new core
    answers the retried query identically without storing it twice, and still refuses another
    node acting for the users."""
    core, tokens = collected(tmp_path / "s.sqlite")
    core.submit_many([release("u1", tokens["u1"], 1).SerializeToString()], node="shard-0")
    phase(core, "train")
    phase(core, "serve")
    first = core.predict(query(tokens), "shard-0")
    before = core.status()
    assert before.duplicates == 1 and before.queries == 1
    again = Aggregator(one_tier_spec(RUN, ADMIN, N_ITEMS), Store(tmp_path / "s.sqlite"))
    assert not again.needs_training() and again.phase == "serve"
    retried = again.predict(query(tokens), "shard-0")
    np.testing.assert_array_equal(retried.scores, first.scores)
    after = again.status()
    assert after.queries == 1 and after.duplicates == before.duplicates + 1
    assert after.releases_accepted == before.releases_accepted
    assert after.train_seconds == before.train_seconds
    from privrec.shared.errors import ProtocolError

    with pytest.raises(ProtocolError, match="not enrolled by this node"):
        again.predict(query(tokens), "evil")
    assert again.model_archive(pb.GetModelRequest(run_id=RUN)) != b""


def test_store_files_are_private(tmp_path: Path) -> None:
    """server.sqlite (every user's releases) and its WAL files are created 0600."""
    core, _ = collected(tmp_path / "s.sqlite")
    for name in ("s.sqlite", "s.sqlite-wal", "s.sqlite-shm"):
        p = tmp_path / name
        if p.exists():
            assert os.stat(p).st_mode & 0o077 == 0, name
    core.store.close()
