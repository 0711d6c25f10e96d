"""The server's side of Xin & Jaakkola's two tiers (NIPS 2014, Sec. 4–5), one protocol piece.

Leaving phase "public", the aggregator fits the public model (µ, V) on the public users'
openly shared ratings and publishes it, with what the mechanism derives from the public users
(PMC's shared h: the *binding*). The private users download it, bind their mechanism, complete
their ratings locally with Eq. (4) and release once, in collect rounds: the server folds each
round's releases in (an incremental private M-step) and re-publishes the model the next round
binds to (the paper re-publishes every w = 20 private users). Training folds the last round.
Every round's model stays downloadable (`GetModel(round=r)`).
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Mapping, Sequence

import numpy as np

from privrec.server.models.base import TwoTierModel
from privrec.server.models.persistence import load_model, save_model
from privrec.server.training import estimates, stack_sparse
from privrec.shared.errors import ProtocolError
from privrec.shared.mechanisms.base import Mechanism, Payload
from privrec.shared.mechanisms.second_order import SecondOrderMechanism
from privrec.shared.serde import write_npz
from privrec.shared.types import Arrays

logger = logging.getLogger(__name__)


class TwoTierRounds:
    """The public fit and the collect rounds of one two-tier run.

    Args:
        model: the run's unfitted two-tier model.
        mechanism: the server's copy of the private tier's mechanism; a second-order one is
            bound to every published model, so private releases validate and de-bias against
            the model their senders used (`raw` for a model whose private tier sends ratings,
            `TwoTierModel.private_release`).
        n_items: m.

    Attributes:
        round: the current collect round (its model is the public model plus the private
            releases of earlier rounds).
        binding: what the mechanism derived from the public users (published with the model).
        published_users: the public users the public model was fitted on.
        folded: the private users already folded into the model, in folding order.
        round_models: round → the arrays published at the start of that round.
    """

    def __init__(self, model: TwoTierModel, mechanism: Mechanism, n_items: int):
        self.model, self.mechanism, self.n_items = model, mechanism, n_items
        self.round = 0
        self.binding: dict[str, float] = {}
        self.published_users: list[str] = []
        self.folded: list[str] = []
        self.round_models: dict[int, Arrays] = {}

    def fit_public(self, users: list[str], ratings: Sequence[Payload]) -> None:
        """Fit and publish the public model (Xin & Jaakkola Sec. 4: the server learns (µ, V)
        from the public users, then asks each private user once for M(r)).

        Raises:
            ProtocolError: too few public users for the model.
        """
        need = self.model.min_public_users
        if len(users) < need:
            raise ProtocolError(
                f"phase: the public model needs at least k = {need} public users, "
                f"{len(users)} submitted"
            )
        public = stack_sparse(ratings, self.n_items)
        model = self.model.fit_public(public)
        assert model.mu_ is not None and model.V_ is not None
        if isinstance(self.mechanism, SecondOrderMechanism):
            self.binding = self.mechanism.public_binding(public, model.mu_, model.V_)
        self._bind()
        self.published_users = users
        self.round_models = {0: model.public_arrays()}
        logger.info("public model fitted on %d public users", len(users))

    def start_round(self, new_round: int, users: list[str], releases: Sequence[Payload]) -> None:
        """Start collect round `new_round`: fold in the private releases not yet in the model
        (`users`, `releases`) and publish the result (Xin & Jaakkola Sec. 5: "the server
        updates (µ, V) every w = 20 private users"). PMC's shared h stays the public model's."""
        self.fold(users, releases)
        self.round = new_round
        self.round_models[new_round] = self.model.public_arrays()
        logger.info(
            "collect round %d: model refitted with %d private releases",
            new_round,
            len(self.folded),
        )

    def fold(self, users: list[str], releases: Sequence[Payload]) -> list[str]:
        """The private M-step with new private releases (`TwoTierModel.add_private` on their
        `Mechanism.estimate`, in the given canonical order); rebinds the mechanism to the new
        model. Returns every private user in the model."""
        if releases:
            if self.model.private_release == "ratings":  # Full EM: the raw ratings themselves
                self.model.add_private(stack_sparse(releases, self.n_items))
            else:
                assert isinstance(self.mechanism, SecondOrderMechanism)
                u = estimates(releases, self.mechanism, self.n_items)
                self.model.add_private(u, diagonal=self.mechanism.moment_diagonal(u))
            self._bind()
            self.folded += users
        return self.folded

    def _bind(self) -> None:
        assert self.model.mu_ is not None and self.model.V_ is not None
        if isinstance(self.mechanism, SecondOrderMechanism):
            self.mechanism.bind(self.model.mu_, self.model.V_, **self.binding)

    def published(self, round_: int) -> Arrays:
        """The arrays published at the start of collect round `round_` (KeyError if none)."""
        return self.round_models[round_]

    def rounds(self) -> list[int]:
        """The rounds that have a saved model, in order."""
        return sorted(self.round_models)

    # ------------------------------------------------------------------ persistence
    def state(self) -> dict[str, bytes]:
        """Everything a restarted aggregator needs to go on exactly where this one is: the
        model's fitted state (`server.models.persistence`), every round's published arrays
        and the bookkeeping (round, binding, public and folded users), as store blobs."""
        buf = io.BytesIO()
        save_model(self.model, buf)
        out = {"two_tier/model": buf.getvalue()}
        meta = {
            "round": self.round,
            "binding": self.binding,
            "published_users": self.published_users,
            "folded": self.folded,
        }
        out["two_tier/meta"] = json.dumps(meta).encode()
        for r, arrays in self.round_models.items():
            buf = io.BytesIO()
            write_npz(buf, arrays)
            out[f"two_tier/round/{r:06d}"] = buf.getvalue()
        return out

    def restore(self, blobs: Mapping[str, bytes]) -> None:
        """Take up the state `state()` wrote (the model, rounds and binding), and rebind the
        server's mechanism to the model, so releases validate as before the restart."""
        from privrec.server.models import MODELS

        model = load_model(blobs["two_tier/model"], MODELS)
        if not isinstance(model, TwoTierModel):
            raise TypeError("the stored two-tier model is not a TwoTierModel")
        meta = json.loads(blobs["two_tier/meta"])
        self.model = model
        self.round = int(meta["round"])
        self.binding = {str(k): float(v) for k, v in meta["binding"].items()}
        self.published_users = [str(u) for u in meta["published_users"]]
        self.folded = [str(u) for u in meta["folded"]]
        self.round_models = {}
        for key, blob in blobs.items():
            if key.startswith("two_tier/round/"):
                with np.load(io.BytesIO(blob)) as z:
                    self.round_models[int(key.rsplit("/", 1)[1])] = {k: z[k] for k in z.files}
        self._bind()


__all__ = ["TwoTierRounds"]
