"""The report's per-user charges of a model's output-privacy claim (`sim.report`): "all" and
"raters" scopes, Predict and Recommend, folds, fits per fold — on a hand-built store."""

from __future__ import annotations

from pathlib import Path

import dp_accounting
import numpy as np
import pytest

from privrec.server.models.base import OutputPrivacy
from privrec.server.store import Store
from privrec.server.store_records import NewRelease
from privrec.shared.accounting.accountant import compose_epsilon
from privrec.shared.capabilities import ModelCapabilities, ModelInput, Serving
from privrec.shared.mechanisms.base import PrivacyStatement, SparsePayload
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.protocol import fold_of
from privrec.shared.run_config import PublicRunConfig
from privrec.shared.serde import payload_to_proto
from privrec.sim.report_privacy import _per_user_charges, _per_user_summary

N_ITEMS, N_FOLDS, SEED = 6, 3, 0
PROFILES = {  # user → rated items
    "a": [0, 1, 2],
    "b": [1, 3],
    "c": [0, 3, 4, 5],
    "d": [2, 5],
    "e": [0, 1],
}


def _release(user: str, items: list[int], nonce: str, purpose: int) -> pb.Release:
    rel = pb.Release(run_id="r", user_id=user, token="t", nonce=nonce, purpose=purpose)
    payload = SparsePayload(N_ITEMS, np.array(items), np.full(len(items), 4.0))
    payload_to_proto("raw_ratings", payload, rel)
    return rel


def _store(tmp_path: Path) -> Store:
    store = Store(tmp_path / "server.sqlite")
    store.add_releases(
        "SubmitStream",
        [
            NewRelease(
                u,
                "profile",
                pb.PURPOSE_PROFILE,
                "raw_ratings",
                _release(u, it, "profile", pb.PURPOSE_PROFILE).SerializeToString(),
            )
            for u, it in PROFILES.items()
        ],
    )
    predict = pb.PredictRequest(
        query=_release("a", [0, 1], "query-0", pb.PURPOSE_QUERY), items=[2, 3, 3]
    )
    recommend = pb.RecommendRequest(
        query=_release("e", [0, 1, 2, 3], "query-1", pb.PURPOSE_QUERY), n=2
    )
    store.add_releases(
        "Predict",
        [NewRelease("a", "query-0", pb.PURPOSE_QUERY, "raw_ratings", predict.SerializeToString())],
    )
    store.add_releases(
        "Recommend",
        [
            NewRelease(
                "e", "query-1", pb.PURPOSE_QUERY, "raw_ratings", recommend.SerializeToString()
            )
        ],
    )
    return store


def _config() -> PublicRunConfig:
    return PublicRunConfig(
        run_id="r",
        mechanism_name="raw",
        public_params={},
        model_name="pncf",
        model_params={},
        capabilities=ModelCapabilities(ModelInput.RELEASES, Serving.QUERIES),
        n_items=N_ITEMS,
        dataset="toy",
        rating_scale=(1.0, 5.0),
        n_folds=N_FOLDS,
        fold_seed=SEED,
        withheld=1,
        max_release_bytes=1 << 20,
    )


def _claim(scope: str, per_fold: bool = False) -> OutputPrivacy:
    return OutputPrivacy(
        PrivacyStatement("pure", 1.0, 0.0, "one user's ratings deleted"),
        fit_event=dp_accounting.LaplaceDpEvent(2.0) if per_fold else None,
        answer_event=dp_accounting.LaplaceDpEvent(1.0),
        answer_scope=scope,
        fit_per_fold=per_fold,
    )


def test_raters_scope_charges_each_predicted_item_to_its_raters(tmp_path: Path) -> None:
    """Predict by a on items {2, 3} (a repeat counts once), Recommend by e predicting every
    item absent from her query ({4, 5}): each charged to the raters outside the querier's
    fold."""
    store = _store(tmp_path)
    try:
        got = _per_user_charges(_claim("raters"), _config(), sorted(PROFILES), store, answered=2)
    finally:
        store.close()
    fold = {u: fold_of(u, N_FOLDS, SEED) for u in PROFILES}
    expected = dict.fromkeys(PROFILES, 0)
    for querier, items in (("a", {2, 3}), ("e", {4, 5})):
        for user, rated in PROFILES.items():
            if fold[user] != fold[querier]:
                expected[user] += len(items & set(rated))
    assert {u: a for u, (_, a) in got.items()} == expected
    assert sum(expected.values()) > 0


def test_all_scope_and_fits_per_fold(tmp_path: Path) -> None:
    """ "all": every answered query for everyone; fits per fold: the folds present but hers."""
    store = _store(tmp_path)
    try:
        got = _per_user_charges(_claim("all", per_fold=True), _config(), sorted(PROFILES), store, 2)
    finally:
        store.close()
    n_present = len({fold_of(u, N_FOLDS, SEED) for u in PROFILES})
    assert set(got.values()) == {(n_present - 1, 2)}


def test_summary_composes_only_max_and_median_yet_matches_all(tmp_path: Path) -> None:
    """The shortcut summary (max and median only) equals composing every user."""
    claim = _claim("raters")
    charges = [(0, 3), (0, 0), (0, 7), (0, 3), (0, 1), (0, 12)]
    summary = _per_user_summary(claim, charges)
    # by hand: ε of c Laplace(1) releases; median of (0, 1, 3, 3, 7, 12) = 3
    assert claim.answer_event is not None
    eps = {c: compose_epsilon([(claim.answer_event, c)], 1e-6) if c else 0.0 for _, c in charges}
    assert summary["users"] == 6
    assert summary["per_user_epsilon"]["max"] == pytest.approx(eps[12])
    assert summary["per_user_epsilon"]["median"] == pytest.approx(eps[3])
    assert summary["naive_sum"]["max"] == pytest.approx(12.0)


def test_summary_of_a_non_private_fit_names_every_user() -> None:
    """A fit event beyond any ε (exact item means, a huge DPPS ε) leaves no ε to state; the
    reason counts every training user, not the probe."""
    claim = OutputPrivacy(
        PrivacyStatement("pure", 1e5, 0.0, "one user's ratings replaced"),
        fit_event=dp_accounting.NonPrivateDpEvent(),
        fit_per_fold=True,
    )
    summary = _per_user_summary(claim, [(4, 0)] * 7)
    assert summary["kind"] == "none" and summary["users"] == 7
    assert summary["reason"].startswith("7 of 7 users made a non-private release")
