"""The adversary's two ways in: replaying the server's transcript, or its own live record.

Both build the same `Observations` from a sequence of `TranscriptRecord`s, so `privrec replay`
over the server's store reproduces what the live adversary computed during the run.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np

from privrec.adversary.attacks import make_attack
from privrec.adversary.attacks.base import AttackOutput, PackedEstimates
from privrec.adversary.knowledge import AdversaryKnowledge
from privrec.adversary.observations import Observations, QueryObservation
from privrec.adversary.sybils import SybilPlan
from privrec.server.store import Store
from privrec.shared.data.dataset import RatingData
from privrec.shared.errors import DataError
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.run_config import PublicRunConfig
from privrec.shared.serde import StoredReleases, payload_from_proto, read_npz, write_npz

logger = logging.getLogger(__name__)
STORE_NAME = "server.sqlite"


def observations_from_records(
    records: Iterable[pb.TranscriptRecord],
    run_config: PublicRunConfig,
    auxiliary: RatingData | None = None,
    *,
    knowledge: AdversaryKnowledge | None = None,
    sybils: SybilPlan | None = None,
    users: Collection[str] | None = None,
) -> Observations:
    """Decode every recorded request into the adversary's view.

    `knowledge` is the run's stated side knowledge and `sybils` what the adversary's sybils
    were answered (both read from the run directory by `side_knowledge`); `auxiliary`
    defaults to the knowledge's auxiliary profiles.

    Profiles are put in a canonical order (by user id), not arrival order: arrival order depends
    on how shards were scheduled, and attacks sum in row order, so a canonical order makes the
    live adversary, `replay` and both launchers agree bit for bit. Queries keep arrival order.
    When the experiment has the attacks fit on a sample of users (`knowledge.fit_users`), only
    their private profile releases are kept: every attack then fits on the sample. `users`, if
    given, names the users whose private profile releases are kept instead (the referee reads
    the attacked users' only).
    """
    knowledge = knowledge if knowledge is not None else AdversaryKnowledge()
    if auxiliary is None:
        auxiliary = knowledge.auxiliary
    obs = Observations(
        run_config=run_config, auxiliary=auxiliary, knowledge=knowledge, sybils=sybils
    )
    # profile releases are kept as the bytes the server stored and decoded when an attack
    # reads them (`StoredReleases`): a million decoded payloads would not fit beside the rest
    # with a fit sample (`knowledge.fit_users`) only the sample's private releases are kept
    wanted = users if users is not None else knowledge.fit_users
    fit = None if wanted is None else frozenset(wanted)
    profiles: dict[str, bytes] = {}
    public: dict[str, bytes] = {}
    for rec in records:
        if rec.method in ("Submit", "SubmitStream"):
            rel = pb.Release.FromString(rec.request)
            if rel.purpose == pb.PURPOSE_PROFILE:
                if rel.WhichOneof("payload") == "public_ratings":
                    public.setdefault(rel.user_id, rec.request)
                elif fit is None or rel.user_id in fit:
                    profiles.setdefault(rel.user_id, rec.request)
        elif rec.method == "Predict":
            req = pb.PredictRequest.FromString(rec.request)
            obs.queries.append(
                QueryObservation(
                    req.query.user_id, payload_from_proto(req.query)[1], tuple(req.items)
                )
            )
    obs.profiles = StoredReleases(dict(sorted(profiles.items())))
    obs.public = StoredReleases(dict(sorted(public.items())))
    return obs


def side_knowledge(run_dir: Path) -> tuple[AdversaryKnowledge, SybilPlan | None]:
    """The run's stated side knowledge and the sybils' record, as the experiment and the
    adversary's sybil clients left them in `run_dir` (both empty when there are none)."""
    return AdversaryKnowledge.read(run_dir), SybilPlan.read(run_dir)


def read_run_config(store: Store) -> PublicRunConfig:
    """The public run config a server store holds.

    Raises:
        DataError: the store holds no run configuration.
    """
    stored = store.get_meta("run_config")
    if stored is None:
        raise DataError(f"{store.path} holds no run configuration")
    return PublicRunConfig.from_json(stored)


def _records(store: Store) -> Iterator[pb.TranscriptRecord]:
    for r in store.transcript():
        yield pb.TranscriptRecord(
            seq=r.seq, arrival_unix_ns=r.arrival_ns, method=r.method, request=r.request
        )


def transcript_records(
    store_path: Path,
) -> tuple[list[pb.TranscriptRecord], PublicRunConfig]:
    """The records and public run config of a server store (opened read-only).

    Raises:
        DataError: the store holds no run configuration.
    """
    store = Store(store_path, read_only=True)
    try:
        run_config = read_run_config(store)
        records = list(_records(store))
    finally:
        store.close()
    return records, run_config


def stored_observations(
    store_path: Path,
    auxiliary: RatingData | None = None,
    *,
    knowledge: AdversaryKnowledge | None = None,
    sybils: SybilPlan | None = None,
    users: Collection[str] | None = None,
) -> Observations:
    """`observations_from_records` over a server store's transcript, read as a stream (the
    records are never all in memory: two million of them, 1.8 GB, at a million users).

    Raises:
        DataError: the store holds no run configuration.
    """
    store = Store(store_path, read_only=True)
    try:
        return observations_from_records(
            _records(store), read_run_config(store), auxiliary, knowledge=knowledge,
            sybils=sybils, users=users,
        )  # fmt: skip
    finally:
        store.close()


AttackProgress = Callable[[str, int, int], None]
"""``progress(attack name, attacks done, attacks to run)``, called before each attack and once
more (with the last name) when all are done."""


def run_attacks(
    obs: Observations,
    names: Sequence[str],
    progress: AttackProgress | None = None,
    seconds: dict[str, float] | None = None,
) -> dict[str, AttackOutput]:
    """Fit each named attack that applies to the run's mechanism.

    Args:
        obs: what the adversary observed.
        names: attack names, run in this order.
        progress: told which attack starts (and when all are done).
        seconds: filled with each attack's fitting time.
    """
    outputs: dict[str, AttackOutput] = {}
    attacks = []
    for name in names:
        attack = make_attack(name)
        if obs.run_config.mechanism_name not in attack.applies_to:
            logger.warning(
                "attack %s does not apply to mechanism %s; skipped",
                name,
                obs.run_config.mechanism_name,
            )
            continue
        attacks.append(attack)
    for i, attack in enumerate(attacks):
        if progress is not None:
            progress(attack.name, i, len(attacks))
        logger.info("attack %d/%d: %s", i + 1, len(attacks), attack.name)
        t = time.perf_counter()
        outputs[attack.name] = attack.fit(obs).output()
        elapsed = time.perf_counter() - t
        logger.info("attack %s done in %.1f s", attack.name, elapsed)
        if seconds is not None:
            seconds[attack.name] = elapsed
    if progress is not None and attacks:
        progress(attacks[-1].name, len(attacks), len(attacks))
    return outputs


def save_output(path: Path, out: AttackOutput) -> None:
    """Write an attack output as .npz (its users in sorted order as one CSR + JSON header)."""
    packed = PackedEstimates.of(out.per_user)
    write_npz(  # per-user estimates: 0600 (`shared.files`)
        path,
        {
            "header": np.array(json.dumps(out.to_dict())),
            "user_ids": np.array(packed.user_ids, str),
            "indptr": packed.indptr,
            "indices": packed.indices,  # int32 where the attack packed them (read as int64)
            "values": packed.data,
            "set_sizes": np.array([out.set_sizes.get(u, -1) for u in packed.user_ids], np.int64),
        },
        private=True,
    )


def load_output(path: Path) -> AttackOutput:
    """Read what `save_output` wrote (the estimates stay packed: `PackedEstimates`).

    Raises:
        DataError: the file is damaged, cut short or not an attack output.
    """
    z = read_npz(path, "attack output")
    try:
        header = json.loads(str(z["header"]))
        users = z["user_ids"].tolist()
        per_user = PackedEstimates(users, z["indptr"], z["indices"], z["values"])
    except (KeyError, ValueError) as exc:
        raise DataError(f"attack output {path} is not one ({exc})") from None
    sizes = z["set_sizes"] if "set_sizes" in z else np.full(len(users), -1)
    return AttackOutput(
        header["attack"],
        header["kind"],
        header["knowledge"],
        per_user,
        header.get("diagnostics", {}),
        {u: int(c) for u, c in zip(users, sizes.tolist(), strict=True) if c >= 0},
    )


def replay(
    run_dir: Path,
    names: Sequence[str],
    out_dir: Path | None = None,
    auxiliary: RatingData | None = None,
    progress: AttackProgress | None = None,
    seconds: dict[str, float] | None = None,
) -> dict[str, AttackOutput]:
    """`privrec replay`: run attacks over a recorded transcript, no server needed
    (`progress` and `seconds` as for `run_attacks`)."""
    store_path = run_dir / STORE_NAME
    if not store_path.exists():
        raise FileNotFoundError(f"{run_dir} has no server store ({STORE_NAME})")
    knowledge, sybils = side_knowledge(run_dir)
    obs = stored_observations(store_path, auxiliary, knowledge=knowledge, sybils=sybils)
    outputs = run_attacks(obs, names, progress, seconds)
    target = out_dir or run_dir / "adversary" / "replay"
    for name, out in outputs.items():
        save_output(target / f"{name}.npz", out)
    return outputs


__all__ = [
    "STORE_NAME",
    "AttackProgress",
    "load_output",
    "observations_from_records",
    "read_run_config",
    "replay",
    "run_attacks",
    "save_output",
    "side_knowledge",
    "stored_observations",
    "transcript_records",
]
