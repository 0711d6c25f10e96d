"""Training and publishing: the run's model fitted from the stored releases, and what is
published of it.

A one-tier model is fitted through `server.fitting` (the one path the reproduce runner and the
sybils' offline answers share), on the stored profile releases in canonical order, as its
`ModelCapabilities.consumes` says. A two-tier model is fitted by its protocol piece
(`server.two_tier.TwoTierRounds`): the public model leaving phase "public", one more private
M-step per collect round, and the last at training.

**Restarts.** Every published model and the fitted model are in the store
(`Store.commit_state`), written in the same transaction as the change they belong to; a new
`Trainer` over the same store takes up the published state, and `needs_training` tells whether a
fit was interrupted (the aggregator then fits again: deterministic, canonical order).
"""

from __future__ import annotations

import contextlib
import json
import logging
import tempfile
import threading
import time

from privrec.server.enrollment import Enrollments
from privrec.server.fitting import FitRecipe, canonical_order
from privrec.server.models import MODELS, Model, TwoTierModel
from privrec.server.models.persistence import load_model, save_model
from privrec.server.state import AggregatorState
from privrec.server.store import StateBlob
from privrec.server.training import StoredPayloads
from privrec.server.two_tier import TwoTierRounds
from privrec.server.validation import check_size, parse, short
from privrec.shared.errors import ProtocolError, ValidationError
from privrec.shared.mechanisms.base import Payload
from privrec.shared.mechanisms.second_order import SecondOrderMechanism
from privrec.shared.memory import release_free_memory
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.protocol import PHASES
from privrec.shared.serde import PublishedModel

logger = logging.getLogger(__name__)


class Trainer:
    """Fits the run's model and publishes it (module docstring).

    Args:
        state: the aggregator's shared state.
        enrollments: the users' tiers (a two-tier fit reads one tier at a time).

    Attributes:
        recipe: how the model is built, fitted and asked (`server.fitting.FitRecipe`).
        rounds: the two-tier protocol piece, or None for a one-tier model.
        model: what answers queries or is published (None before anything is).
        stage: what `GetModel` publishes: "", "public" or "final".
        published_users: the users the published model was fitted on.

    Raises:
        TypeError: a two-tier model without a second-order mechanism (`sim` and
            `server.spec.check_tiers` refuse such a config first, with a config error).
    """

    def __init__(self, state: AggregatorState, enrollments: Enrollments) -> None:
        self.state, self.enrollments = state, enrollments
        spec = state.spec
        self.recipe = FitRecipe.of_spec(spec)
        self.capabilities = MODELS.lookup(spec.model).capabilities
        self.rounds: TwoTierRounds | None = None
        self.model: Model | None = None
        self.stage = ""
        self.published_users: list[str] = []
        self._train_lock = threading.Lock()  # one fit at a time
        if self.capabilities.public_tier:
            model = MODELS.build(spec.model, spec.model_params)
            if not isinstance(model, TwoTierModel) or (
                model.private_release == "second-order"
                and not isinstance(spec.mechanism, SecondOrderMechanism)
            ):
                raise TypeError("a two-tier run needs a TwoTierModel and a second-order mechanism")
            self.rounds = TwoTierRounds(model, spec.mechanism, spec.n_items)

    @property
    def round(self) -> int:
        """The current collect round of a two-tier run (0 otherwise)."""
        return self.rounds.round if self.rounds is not None else 0

    @property
    def trained(self) -> bool:
        """True once the final model is fitted."""
        return self.stage == "final"

    def restore(self) -> None:
        """Take up the stored state: the published and fitted models of the phase reached."""
        store = self.state.store
        trained = store.get_meta("trained") == "1"
        if self.rounds is not None:
            keys = store.state_keys("two_tier/")
            if keys:
                self.rounds.restore({k: store.get_state(k) or b"" for k in keys})
                self.model, self.stage = self.rounds.model, "public"
                self.published_users = self.rounds.published_users
        elif trained:
            with store.state_file("final/model") as archive:
                if archive is not None:
                    self.model = load_model(archive, MODELS)
        if trained:
            users = store.get_state("final/users")
            self.published_users = json.loads(users) if users else []
            self.stage = "final"

    def needs_training(self) -> bool:
        """The phase is "train" or later but no fitted model is stored (a restart during a
        fit)."""
        return PHASES.index(self.state.phase) >= PHASES.index("train") and not self.trained

    # ------------------------------------------------------------------ the stored releases
    def _profiles(
        self, tier: int | None = None, exclude: set[str] | frozenset[str] = frozenset()
    ) -> tuple[list[str], StoredPayloads]:
        """User ids and payloads of the stored profile releases (of `tier`, if given, and not
        of the users in `exclude`), in canonical order; the payloads are left as the stored
        bytes and decoded on access."""
        with self.state.lock:
            rows = list(self.state.store.releases_by_purpose(pb.PURPOSE_PROFILE))
        users, raws = canonical_order(
            (u, raw)
            for u, raw in rows
            if u not in exclude and (tier is None or self.enrollments.tier_of(u) == tier)
        )
        del rows
        return users, StoredPayloads(raws)

    def _decoded(
        self, tier: int | None = None, exclude: set[str] | frozenset[str] = frozenset()
    ) -> tuple[list[str], list[Payload]]:
        users, stored = self._profiles(tier, exclude)
        return users, stored[:]

    def _two_tier(self) -> TwoTierRounds:
        if self.rounds is None:
            raise ProtocolError(f"model: {self.state.spec.model} has no public tier")
        return self.rounds

    def _unfolded_private(self) -> tuple[list[str], list[Payload]]:
        """The private profile releases not yet folded into the two-tier model."""
        return self._decoded(pb.TIER_PRIVATE, exclude=set(self._two_tier().folded))

    # ------------------------------------------------------------------ fitting
    def fit_public(self) -> None:
        """Fit and publish the public model of a two-tier run (`TwoTierRounds.fit_public`),
        and move to "collect" with it stored. Holds the writer lock throughout, so no public
        release arrives after the fit read the public releases.

        Raises:
            ProtocolError: too few public users for the model.
        """
        rounds = self._two_tier()
        with self.state.lock:
            rounds.fit_public(*self._decoded(pb.TIER_PUBLIC))
            self.model, self.stage = rounds.model, "public"
            self.published_users = rounds.published_users
            self.state.move_to("collect", rounds.state())

    def fold_private(self, new_round: int) -> None:
        """Start collect round `new_round` of a two-tier run (`TwoTierRounds.start_round`),
        stored with the model it publishes."""
        rounds = self._two_tier()
        with self.state.lock:
            rounds.start_round(new_round, *self._unfolded_private())
            self.state.store.commit_state({"round": str(new_round)}, rounds.state())

    def ensure_trained(self) -> None:
        """Fit the model unless it is fitted (waits for a fit in progress)."""
        with self._train_lock:
            if not self.trained:
                self.train()

    def train(self) -> None:
        """Fit the model on the stored profile releases (Bilge §1.4 step 2) through
        `server.fitting`; for a two-tier model, the last private M-step on top of the public
        model. The fitted model is stored (`server.models.persistence`) before it is
        published."""
        state = self.state
        t0 = time.perf_counter()
        blobs: dict[str, StateBlob]
        with contextlib.ExitStack() as stack:
            if self.rounds is not None:
                users = self.rounds.published_users + self.rounds.fold(*self._unfolded_private())
                model: Model = self.rounds.model
                blobs = dict(self.rounds.state())
            else:
                users, rows = self._profiles()  # decoded block by block where the input can
                train = self.recipe.training_input(rows)
                del rows  # the stored bytes (≈ 2 kB per RPT release) not held through the fit
                # ... nor kept resident: a million small bytes objects leave glibc's heap
                # fragmented, ≈ 2 GB at a million users (shared.memory)
                release_free_memory()
                model = self.recipe.fit_input(users, train)
                del train
                release_free_memory()
                # the archive goes through a temporary file beside the store, which the store
                # reads one part at a time: never held whole (2.1 GB at a million users)
                archive = stack.enter_context(tempfile.TemporaryFile(dir=state.store.path.parent))
                save_model(model, archive)
                archive.seek(0)
                blobs = {"final/model": archive}
            blobs["final/users"] = json.dumps(users).encode()
            with state.lock:
                state.counters.train_seconds = time.perf_counter() - t0
                state.store.commit_state({"trained": "1", **state.counters_meta()}, blobs)
                self.model, self.stage, self.published_users = model, "final", users
        logger.info(
            "trained %s on %d profiles in %.2fs",
            state.spec.model,
            len(users),
            state.counters.train_seconds,
        )

    # ------------------------------------------------------------------ publishing
    def model_archive(self, req: pb.GetModelRequest | bytes) -> bytes:
        """The published model (`shared.serde.PublishedModel`, public: what every client may
        download); with `req.round`, the model a two-tier run published at the start of that
        collect round."""
        spec = self.state.spec
        if isinstance(req, bytes):
            check_size(req, spec.limits.small_bytes, "GetModelRequest")
            req = parse(pb.GetModelRequest, req, "GetModelRequest")
        self.state.check_run(req.run_id)
        if req.name and req.name != spec.model:
            raise ValidationError(
                "name", f"this run publishes model {spec.model!r}, not {short(req.name)}"
            )
        with self.state.lock:  # a consistent (stage, model, round) while a fit may replace them
            model, stage, round_ = self.model, self.stage, self.round
            users = tuple(self.published_users)
            if not stage or model is None:
                raise ProtocolError(
                    "model: nothing published yet (the public model of a two-tier "
                    "run comes with phase 'collect', any other after 'train')"
                )
            arrays = model.public_arrays()
            if req.HasField("round"):
                published = self.rounds.rounds() if self.rounds is not None else []
                if req.round not in published:
                    raise ValidationError(
                        "round",
                        f"no model was published for collect round "
                        f"{req.round} (published: {published})",
                    )
                assert self.rounds is not None
                stage, round_ = ("public" if req.round == 0 else "round"), req.round
                arrays = self.rounds.published(req.round)
            binding = dict(self.rounds.binding) if self.rounds is not None else {}
        return PublishedModel(
            name=spec.model,
            params=spec.model_params,
            stage=stage,
            round=round_,
            binding=binding,
            user_ids=users,
            arrays=arrays,
        ).to_bytes()


__all__ = ["Trainer"]
