"""The two-tier protocol of Xin & Jaakkola over a real grpc.aio server: public users share their
ratings in phase "public", the server publishes (µ, V) and PMC's shared h through GetModel, the
private users release against it in "collect", and each tier is held to its own phase, payload
and enrollment."""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import numpy as np
import pytest
import scipy.sparse as sp

from privrec.client.transport import verified_archive
from privrec.server.aggregator import Aggregator
from privrec.server.spec import RunSpec
from privrec.server.store import Store
from privrec.shared.mechanisms import PrivateContinuous
from privrec.shared.mechanisms.base import DensePayload, Profile, SparsePayload
from privrec.shared.mechanisms.completion import estimate_shared_h
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.proto.privrec.v1 import aggregator_pb2_grpc as pb_grpc
from privrec.shared.serde import payload_to_proto
from tests.grpc_helpers import expect, served_channel

RUN, ADMIN, M, RANK = "tt-run", "admin", 30, 2
PUBLIC = [f"pub{i}" for i in range(6)]
PRIVATE = [f"priv{i}" for i in range(8)]


def spec(tmp_path: Path) -> Aggregator:
    s = RunSpec(
        run_id=RUN,
        mechanism=PrivateContinuous(h_mode="shared"),
        model="two_tier_lowrank",
        model_params={"k": RANK},
        n_items=M,
        dataset="test",
        rating_scale=(1, 5),
        n_folds=2,
        fold_seed=0,
        max_release_bytes=1 << 16,
        admin_token=ADMIN,
        token_key=b"k" * 32,
    )
    return Aggregator(s, Store(tmp_path / "server.sqlite"))


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[Aggregator, grpc.aio.Channel]]:
    core = spec(tmp_path)
    async with served_channel(core) as channel:
        yield core, channel


def ratings(user: str) -> Profile:
    rng = np.random.default_rng([ord(c) for c in user])
    items = np.sort(rng.choice(M, 15, replace=False))
    return Profile(items, rng.integers(1, 6, 15).astype(float), M)


def public_release(user: str, token: str) -> pb.Release:
    p = ratings(user)
    rel = pb.Release(
        run_id=RUN, user_id=user, token=token, nonce="profile", purpose=pb.PURPOSE_PROFILE
    )
    payload_to_proto("public_ratings", SparsePayload(M, p.items, p.ratings), rel)
    return rel


def private_release(user: str, token: str, mech: PrivateContinuous) -> pb.Release:
    rel = pb.Release(
        run_id=RUN, user_id=user, token=token, nonce="profile", purpose=pb.PURPOSE_PROFILE
    )
    payload_to_proto("pmc", mech.release(ratings(user), np.random.default_rng(7)), rel)
    return rel


async def model_of(agg: pb_grpc.AggregatorStub, round_: int | None = None) -> dict[str, np.ndarray]:
    req = pb.GetModelRequest(run_id=RUN, round=round_)
    raw = verified_archive([c async for c in agg.GetModel(req)])
    with np.load(io.BytesIO(raw)) as z:
        return {k: z[k] for k in z.files}


async def test_two_tier_protocol_gates_each_tier(served) -> None:
    core, ch = served
    agg, admin = pb_grpc.AggregatorStub(ch), pb_grpc.AdminStub(ch)

    async def phase(name: str) -> pb.RunStatus:
        return await admin.SetPhase(pb.SetPhaseRequest(run_id=RUN, admin_token=ADMIN, phase=name))

    await phase("enroll")
    tokens = {}
    for user, tier in [(u, pb.TIER_PUBLIC) for u in PUBLIC] + [
        (u, pb.TIER_PRIVATE) for u in PRIVATE
    ]:
        tokens[user] = (
            await agg.Enroll(pb.EnrollRequest(run_id=RUN, user_id=user, tier=tier))
        ).token
    await expect(
        grpc.StatusCode.ALREADY_EXISTS,
        "another tier",
        agg.Enroll(pb.EnrollRequest(run_id=RUN, user_id=PUBLIC[0], tier=pb.TIER_PRIVATE)),
    )
    await expect(
        grpc.StatusCode.FAILED_PRECONDITION,
        "nothing published yet",
        agg.GetModel(pb.GetModelRequest(run_id=RUN)).read(),
    )

    await phase("public")
    unbound = PrivateContinuous(h_mode="shared").bind(
        np.full(M, 3.0), np.zeros((M, 1)), shared_h=1.0
    )
    before = core.store.snapshot()
    await expect(
        grpc.StatusCode.FAILED_PRECONDITION,
        "private-tier releases are accepted in phase 'collect'",
        agg.Submit(private_release(PRIVATE[0], tokens[PRIVATE[0]], unbound)),
    )
    wrong_payload = private_release(PUBLIC[0], tokens[PUBLIC[0]], unbound)
    await expect(
        grpc.StatusCode.INVALID_ARGUMENT,
        "not accepted from a TIER_PUBLIC user",
        agg.Submit(wrong_payload),
    )
    assert core.store.snapshot() == before
    for user in PUBLIC:
        await agg.Submit(public_release(user, tokens[user]))
    status = await phase("collect")
    assert status.public_profiles == len(PUBLIC) and status.profiles == len(PUBLIC)

    # the public model: µ = the public users' item means, h = estimate_shared_h of them
    published = await model_of(agg)
    assert str(published["stage"]) == "public" and int(published["n_profiles"]) == len(PUBLIC)
    rows = [ratings(u) for u in sorted(PUBLIC)]
    public = sp.csr_matrix(
        (
            np.concatenate([p.ratings for p in rows]),
            np.concatenate([p.items for p in rows]),
            np.arange(len(rows) + 1) * 15,
        ),
        shape=(len(rows), M),
    )
    counts = np.diff(public.tocsc().indptr)
    sums = np.asarray(public.sum(axis=0)).ravel()
    mu = np.where(counts > 0, sums / np.maximum(counts, 1), public.data.mean())
    np.testing.assert_allclose(published["mu"], mu)
    h = estimate_shared_h(public, published["mu"], published["V"], 1.0)
    assert published["binding"].item() == f'{{"shared_h": {h!r}}}'

    await expect(
        grpc.StatusCode.FAILED_PRECONDITION,
        "public-tier releases are accepted in phase 'public'",
        agg.Submit(public_release(PUBLIC[1], tokens[PUBLIC[1]])),
    )
    mech = PrivateContinuous(h_mode="shared").bind(published["mu"], published["V"], shared_h=h)
    wrong_h = pb.Release(
        run_id=RUN,
        user_id=PRIVATE[0],
        token=tokens[PRIVATE[0]],
        nonce="profile",
        purpose=pb.PURPOSE_PROFILE,
    )
    payload_to_proto("pmc", DensePayload(np.full(M, 2 * h)), wrong_h)
    before = core.store.snapshot()
    await expect(grpc.StatusCode.INVALID_ARGUMENT, "pmc.values", agg.Submit(wrong_h))
    assert core.store.snapshot() == before
    for user in PRIVATE:
        await agg.Submit(private_release(user, tokens[user], mech))
    status = await phase("train")
    assert status.profiles == len(PUBLIC) + len(PRIVATE) and status.releases_rejected == 5

    final = await model_of(agg)
    assert str(final["stage"]) == "final"
    assert int(final["n_public"]) == len(PUBLIC) and int(final["n_private"]) == len(PRIVATE)
    assert list(final["user_ids"]) == sorted(PUBLIC) + sorted(PRIVATE)
    np.testing.assert_allclose(final["mu"], published["mu"])  # µ: public users only (§A7)
    assert not np.allclose(final["V"] @ final["V"].T, published["V"] @ published["V"].T)


async def test_too_few_public_users_keeps_the_phase(tmp_path: Path) -> None:
    """Leaving "public" with fewer public users than the rank is refused; nothing changes."""
    core = spec(tmp_path)

    def set_phase(name):
        return core.set_phase(pb.SetPhaseRequest(run_id=RUN, admin_token=ADMIN, phase=name))

    set_phase("public")
    token = core.enroll(
        pb.EnrollRequest(run_id=RUN, user_id="p", tier=pb.TIER_PUBLIC).SerializeToString()
    ).token
    core.submit(public_release("p", token).SerializeToString())
    from privrec.shared.errors import ProtocolError

    with pytest.raises(ProtocolError, match="at least k = 2 public users, 1 submitted"):
        set_phase("collect")
    assert core.phase == "public"
    core.store.close()


async def test_collect_rounds_republish_the_model(served) -> None:
    """SetPhase(collect, round=r) folds the private releases so far into the model and publishes
    it (RunConfig.round, archive `round`); a round outside collect, or going back, is refused."""
    core, ch = served
    agg, admin = pb_grpc.AggregatorStub(ch), pb_grpc.AdminStub(ch)

    async def phase(name: str, round_: int = 0) -> pb.RunStatus:
        return await admin.SetPhase(
            pb.SetPhaseRequest(run_id=RUN, admin_token=ADMIN, phase=name, round=round_)
        )

    await phase("enroll")
    tokens = {
        u: (
            await agg.Enroll(
                pb.EnrollRequest(
                    run_id=RUN, user_id=u, tier=pb.TIER_PUBLIC if u in PUBLIC else pb.TIER_PRIVATE
                )
            )
        ).token
        for u in PUBLIC + PRIVATE
    }
    await expect(grpc.StatusCode.INVALID_ARGUMENT, "only the collect phase", phase("public", 1))
    assert core.phase == "enroll"
    await phase("public")
    for user in PUBLIC:
        await agg.Submit(public_release(user, tokens[user]))
    await phase("collect")
    first = await model_of(agg)
    h = json.loads(first["binding"].item())["shared_h"]
    mech = PrivateContinuous(h_mode="shared").bind(first["mu"], first["V"], shared_h=h)
    for user in PRIVATE[:4]:
        await agg.Submit(private_release(user, tokens[user], mech))
    status = await phase("collect", 1)
    assert status.round == 1 and status.phase == "collect"
    assert (await agg.GetRunConfig(pb.GetRunConfigRequest(run_id=RUN))).round == 1
    second = await model_of(agg)
    assert int(second["round"]) == 1 and int(second["n_private"]) == 4
    assert not np.allclose(second["V"] @ second["V"].T, first["V"] @ first["V"].T)
    assert second["binding"].item() == first["binding"].item()  # h: public users only
    await phase("collect", 2)
    await expect(
        grpc.StatusCode.FAILED_PRECONDITION, "cannot go back from round 2 to 1", phase("collect", 1)
    )
    assert core.status().round == 2
    # every round's model stays downloadable: a shard with no user in a round still gets it
    again = await model_of(agg, 1)
    assert int(again["round"]) == 1 and str(again["stage"]) == "round"
    np.testing.assert_array_equal(again["V"], second["V"])
    np.testing.assert_array_equal((await model_of(agg, 0))["V"], first["V"])
    await expect(
        grpc.StatusCode.INVALID_ARGUMENT,
        "no model was published for collect round 5",
        model_of(agg, 5),
    )


def test_adversary_rebuilds_the_stored_run_config(tmp_path: Path) -> None:
    """The live adversary's run config (from GetRunConfig) is the dict the server stores, so
    live attacks and replay read the same model parameters."""
    from privrec.shared.run_config import PublicRunConfig

    core = spec(tmp_path)
    rc = core.run_config(pb.GetRunConfigRequest(run_id=RUN))
    stored = PublicRunConfig.from_json(core.store.get_meta("run_config") or "{}")
    assert PublicRunConfig.from_proto(rc) == stored == core.public_config()
    core.store.close()
