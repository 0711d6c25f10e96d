"""The phases of a run, driven by the orchestrator the same way for every launcher.

`drive_phases` moves the server through enroll → public → collect (two-tier: one round after
another) → train → serve → attack with SetPhase (`sim.admin_client.Admin`), announces each on
the MQTT control plane, and waits between them for the counts that say a phase is done (the
users enrolled, the profiles released, the queries answered), reporting progress as it goes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import numpy as np

from privrec.server.models import MODELS
from privrec.shared.capabilities import Serving
from privrec.shared.config import ExperimentConfig
from privrec.shared.control import ControlPlane
from privrec.shared.data.dataset import RatingData
from privrec.shared.population import collect_rounds, rows_of_testers
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.sim.admin_client import Admin
from privrec.sim.progress import Progress, label

POLL_S = 0.1
"""How often the orchestrator asks for counts while it waits."""


async def announce(control: ControlPlane | None, phase: str) -> None:
    """Announce `phase` on the MQTT control plane (nothing without a broker)."""
    if control is not None:
        await control.announce_phase(phase)


async def drive_phases(
    admin: Admin,
    control: ControlPlane | None,
    config: ExperimentConfig,
    data: RatingData,
    timings: dict[str, float],
    progress: Progress | None,
    serve_done: Callable[[], Awaitable[None]],
    check: Callable[[], None],
    model: Callable[[], Awaitable[bytes]],
    out: Path,
    sybils: tuple[int, int] = (0, 0),
    checkpoint: Callable[[], Awaitable[None]] | None = None,
) -> pb.RunStatus:
    """The phase sequence, the same for both launchers. `sybils` = (sybil users that enroll,
    crowd profiles they release) counts on top of the population (`adversary.sybils`).
    `checkpoint` is awaited after each collect round, the fit and the serving (crash
    injection, `sim.faults.NodeSupervisor.checkpoint`)."""
    tell = progress or (lambda _label, _done, _total: None)

    async def until(
        phase: str, field: str, target: int, total: int | None = None, detail: str = ""
    ) -> None:
        while True:
            check()
            st = await admin.status()
            done = int(getattr(st, field))
            what = detail or field
            if phase == "enroll" and not done:
                what = "the shards start and load their users' data"
            tell(label(phase, what), done, target if total is None else total)
            if done >= target:
                return
            await asyncio.sleep(POLL_S)

    n_users = data.n_users
    n_public = min(config.population.public_users, n_users)
    for phase, field, target, detail in (
        ("enroll", "enrolled", n_users + sybils[0], "users enrolled"),
        ("public", "public_profiles", n_public, "public users' ratings shared"),
    ):
        t = time.perf_counter()
        await admin.set_phase(phase)
        await announce(control, phase)
        if target:  # (a one-tier run passes through "public" with nobody to wait for)
            await until(phase, field, target, detail=detail)
        timings[phase] = time.perf_counter() - t
    t = time.perf_counter()
    await admin.set_phase("collect")
    await announce(control, "collect")
    # two-tier rounds: after round r's private users are in, the server refits and publishes
    # the model that round r + 1 binds to (Xin & Jaakkola: every w = 20 private users)
    rounds = collect_rounds(data, config.population, config.run.seed)
    per_round = np.bincount([r for r in rounds if r >= 0], minlength=1)
    for r, done in enumerate(np.cumsum(per_round)):
        if r:
            tell(label("collect", f"the server refits for round {r + 1}/{per_round.size}"), 0, 0)
            await admin.set_phase("collect", r)
        where = f" (round {r + 1}/{per_round.size})" if per_round.size > 1 else ""
        crowd = sybils[1] if r == len(per_round) - 1 else 0
        await until(
            "collect",
            "profiles",
            n_public + int(done) + crowd,
            n_users + crowd,
            f"profiles released{where}",
        )
        if checkpoint is not None:
            await checkpoint()
    timings["collect"] = time.perf_counter() - t
    t = time.perf_counter()
    tell(label("train", f"the server fits {config.model.name} on the releases"), 0, 1)
    await admin.set_phase("train")
    await announce(control, "train")
    if checkpoint is not None:
        await checkpoint()
    tell(label("train", f"{config.model.name} fitted"), 1, 1)
    timings["train"] = time.perf_counter() - t
    t = time.perf_counter()
    await admin.set_phase("serve")
    await announce(control, "serve")
    serving = asyncio.ensure_future(serve_done())
    expected = expected_queries(config, data)
    detail = "queries answered" if expected else "users predict locally or read the result"
    try:
        while not serving.done():
            check()
            tell(label("serve", detail), int((await admin.status()).queries), expected)
            await asyncio.wait({serving}, timeout=POLL_S)
    finally:
        if not serving.done():
            serving.cancel()
    await serving
    if checkpoint is not None:
        await checkpoint()
    tell(label("serve", detail), expected or 1, expected or 1)
    # the published model, as any client may download it (the referee scores graph models)
    (out / "model.npz").write_bytes(await model())
    timings["serve"] = time.perf_counter() - t
    await admin.set_phase("attack")
    await announce(control, "attack")
    return await admin.status()


def expected_queries(config: ExperimentConfig, data: RatingData) -> int:
    """How many Predict queries the serve phase brings: one per test user when the model
    answers queries, none otherwise (it publishes parameters or a result)."""
    if MODELS.lookup(config.model.name).capabilities.serving is not Serving.QUERIES:
        return 0
    return int(rows_of_testers(data, config).size)


def attack_progress(progress: Progress | None) -> Callable[[str, int, int], None]:
    """The attack runner's callback (`adversary.replay.AttackProgress`) as run progress."""

    def tell(attack: str, done: int, total: int) -> None:
        if progress is not None:
            what = f"running {attack}" if done < total else "every attack done"
            progress(label("attack", what), done, total)

    return tell


__all__ = ["POLL_S", "announce", "attack_progress", "drive_phases", "expected_queries"]
