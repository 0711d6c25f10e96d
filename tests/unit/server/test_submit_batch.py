"""A batch of profile releases (`Submissions.submit_many`): a release repeated in a batch is
stored once, a nonce reused with another content refuses the whole batch at its position, and
that refusal comes before the phase's, as it did when the two were separate passes (issue 28:
one pass over the batch). Both the batch decoder's lane (≥ `MIN_BATCH` releases) and the full
parse's."""

from __future__ import annotations

from pathlib import Path

import pytest

from privrec.server.aggregator import Aggregator
from privrec.server.release_view import MIN_BATCH
from privrec.server.store import Store
from privrec.shared.errors import AlreadyExistsError, ProtocolError
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from tests.grpc_helpers import one_tier_spec
from tests.unit.server.test_feed_batches import ADMIN, N_ITEMS, RUN, release


def _core(tmp_path: Path, n: int) -> tuple[Aggregator, list[bytes]]:
    core = Aggregator(one_tier_spec(RUN, ADMIN, N_ITEMS), Store(tmp_path / "s.sqlite"))
    core.set_phase(pb.SetPhaseRequest(run_id=RUN, admin_token=ADMIN, phase="enroll"))
    users = [f"u{i}" for i in range(n)]
    answers = core.enroll_many(
        [
            pb.EnrollRequest(run_id=RUN, user_id=u, tier=pb.TIER_PRIVATE).SerializeToString()
            for u in users
        ],
        "shard-0",
    )
    return core, [
        release(u, i, a.token) for i, (u, a) in enumerate(zip(users, answers, strict=True))
    ]


def _phase(core: Aggregator, name: str) -> None:
    core.set_phase(pb.SetPhaseRequest(run_id=RUN, admin_token=ADMIN, phase=name))


@pytest.mark.parametrize("n", [4, MIN_BATCH + 8])
def test_a_repeat_is_stored_once_and_a_changed_repeat_refuses_the_batch(
    tmp_path: Path, n: int
) -> None:
    core, raws = _core(tmp_path, n)
    _phase(core, "collect")
    changed = release("u1", 1000, core.enrollments.token("u1", "shard-0"))
    before = core.store.snapshot()
    with pytest.raises(AlreadyExistsError) as refused:
        core.submit_many([*raws, changed], node="shard-0")
    assert str(refused.value) == (
        f"releases[{n}].nonce: 'profile' appears twice in this batch for one user with "
        "different contents"
    )
    assert core.store.snapshot() == before
    seqs = core.submit_many([raws[1], *raws, raws[1]], node="shard-0")
    first = before[0] + 1
    assert seqs == [first, first + 1, None, *range(first + 2, first + n), None]
    assert core.store.count("releases") == n and core.counters.duplicates == 2
    assert core.submit_many(raws, node="shard-0") == [None] * n  # a retried batch
    assert core.counters.duplicates == 2 + n
    core.store.close()


@pytest.mark.parametrize("n", [4, MIN_BATCH + 8])
def test_a_changed_repeat_is_refused_before_the_phase(tmp_path: Path, n: int) -> None:
    core, raws = _core(tmp_path, n)
    _phase(core, "collect")
    core.submit_many(raws[:1], node="shard-0")
    _phase(core, "train")  # profiles are no longer accepted
    rest = raws[1:] * 2  # (still a batch for the decoder's lane)
    changed = release("u2", 1000, core.enrollments.token("u2", "shard-0"))
    before = core.store.snapshot()
    with pytest.raises(AlreadyExistsError, match=rf"^releases\[{len(rest)}\]\.nonce: "):
        core.submit_many([*rest, changed], node="shard-0")
    with pytest.raises(ProtocolError, match=r"^releases\[0\]\.phase: .* not 'train'"):
        core.submit_many(rest, node="shard-0")
    assert core.store.snapshot() == before
    core.store.close()
