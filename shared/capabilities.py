"""What a server-side model declares about itself, readable without building one.

Every model class of `privrec.server.models` carries a `ModelCapabilities` as a class
attribute. The aggregator dispatches on it (what to feed `fit`, whether to answer queries, what
`GetModel` publishes), and it travels in the public run configuration so that clients, the
adversary and the referee know the same without importing the server: whether to query
(`Serving.QUERIES`) and how to read a score (`ScoreKind`), or which shared rule predicts
locally from the published parameters (`Serving.LOCAL`, `local_predictor`), or what the
published result is (`Serving.PUBLISHED`, `publishes`).

Every mechanism declares what its releases are (`ReleaseKind`: the payload's shape and the
scale of its values) and every model which scales it reads (`Model.accepts`), so that a
mechanism, a model and the attacks that cannot work together are refused before a run starts
(`sim.compatibility`), not half-way through it.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from typing import Any, Self


class ModelInput(enum.StrEnum):
    """What the aggregator feeds a model."""

    RELEASES = "releases"
    """The profile releases' own sparse values as one CSR matrix (e.g. PPCF on RPT releases)."""
    ESTIMATES = "estimates"
    """`Mechanism.estimate` of each release: dense de-biased rows (e.g. the sketch kNN graph)."""
    ESTIMATE_SUM = "estimate-sum"
    """The sum of `Mechanism.estimate` over all releases and their number, summed in blocks so
    that no dense N x m matrix is built (e.g. OUE item frequencies, `server.models.frequency`)."""
    TWO_TIER = "two-tier"
    """Public-tier ratings first, then the private users' second-order releases, in collect
    rounds (Xin & Jaakkola): the model publishes a public model the private users bind to."""


class Serving(enum.StrEnum):
    """How a fitted model's utility reaches the users."""

    QUERIES = "queries"
    """It answers Predict/Recommend on the server, for blocks of freshly perturbed queries."""
    LOCAL = "local"
    """It publishes parameters through GetModel; each user predicts herself with them."""
    PUBLISHED = "published"
    """It publishes one result (e.g. a neighbour graph) that nobody queries."""


class ScoreKind(enum.StrEnum):
    """What a score of `Predict` (or of local prediction) is."""

    ZSCORE = "zscore"
    """A normalised score P′; the user de-normalises it with her own statistics (Bilge Eq 2.5)."""
    RATING = "rating"
    """A rating on the rating scale, used as it is."""
    PROBABILITY = "probability"
    """A binary classifier's P(like) in [0, 1] (Bilge Eq 8.1, NBC on RRT data); the user reads
    the class, like when P > 1/2, and the referee scores classification accuracy and F1 against
    the binarised truth (the mechanism's public like `threshold`)."""


class PayloadKind(enum.StrEnum):
    """The wire shape of a release: `SparsePayload` (values at some coordinates),
    `DensePayload` (a real vector) or `BitPayload` (`shared.mechanisms.base`)."""

    SPARSE = "sparse"
    DENSE = "dense"
    BITS = "bits"


class ReleaseScale(enum.StrEnum):
    """What the values of a profile release are, i.e. what a model must read them as."""

    ZSCORE = "zscore"
    """Disguised z-scores at the filled cells (RPT, Bilge Procedure 1)."""
    RATING = "rating"
    """The ratings themselves on the rating scale (a trusted curator: `raw`)."""
    BINARY = "binary"
    """Perturbed likes, 0 or 1, at the filled cells (RRT, Bilge Procedure 2)."""
    ITEM_BITS = "item-bits"
    """One perturbed bit per catalogue item, whose de-biased estimate is the user's item
    indicator (OUE, Wang et al. 2017)."""
    SKETCH = "sketch"
    """An encoding of the user's item set in a sketch space (BLIP's Bloom bits, JLT's
    projection, Balu §3.1–3.2): comparable between users through `Mechanism.estimate`, but
    not item by item."""
    SECOND_ORDER = "second-order"
    """A vector bound to the published public model (Xin & Jaakkola's second-order
    mechanisms)."""

    @property
    def description(self) -> str:
        """A few words for messages, e.g. "disguised z-scores"."""
        return _SCALE_WORDS[self]


_SCALE_WORDS = {
    ReleaseScale.ZSCORE: "disguised z-scores",
    ReleaseScale.RATING: "ratings",
    ReleaseScale.BINARY: "binary likes",
    ReleaseScale.ITEM_BITS: "one perturbed bit per item",
    ReleaseScale.SKETCH: "a sketch of the item set",
    ReleaseScale.SECOND_ORDER: "second-order vectors bound to a public model",
}


@dataclasses.dataclass(frozen=True, slots=True)
class ReleaseKind:
    """What one mechanism's profile releases are (`Mechanism.releases`).

    Attributes:
        payload: the wire shape.
        scale: what the values mean.
    """

    payload: PayloadKind
    scale: ReleaseScale


@dataclasses.dataclass(frozen=True, slots=True)
class ModelCapabilities:
    """A model's declaration (see the module docstring).

    Attributes:
        consumes: what `fit` receives.
        serving: how users get their predictions.
        scores: what a score means (for QUERIES and LOCAL).
        local_predictor: for LOCAL, the name of the rule in `shared.local_prediction`.
        publishes: for PUBLISHED, what the result is (the referee's scoring rule), e.g.
            "knn_graph".
    """

    consumes: ModelInput
    serving: Serving
    scores: ScoreKind = ScoreKind.RATING
    local_predictor: str = ""
    publishes: str = ""

    def __post_init__(self) -> None:
        for name, enum_type in (
            ("consumes", ModelInput),
            ("serving", Serving),
            ("scores", ScoreKind),
        ):
            value = getattr(self, name)
            try:
                object.__setattr__(self, name, enum_type(value))
            except ValueError:
                raise ValueError(
                    f"`{name}` must be one of {[e.value for e in enum_type]}, got {value!r}"
                ) from None
        if (self.serving is Serving.LOCAL) != bool(self.local_predictor):
            raise ValueError("`local_predictor` is set exactly when `serving` is 'local'")
        if (self.serving is Serving.PUBLISHED) != bool(self.publishes):
            raise ValueError("`publishes` is set exactly when `serving` is 'published'")

    @property
    def public_tier(self) -> bool:
        """Whether the run has a public tier (users who share their ratings openly)."""
        return self.consumes is ModelInput.TWO_TIER

    @property
    def answers_queries(self) -> bool:
        """True when the model answers Predict/Recommend queries (not only a published model)."""
        return self.serving is Serving.QUERIES

    def to_dict(self) -> dict[str, str]:
        """JSON-able form (strings), for the public run configuration."""
        return {f.name: str(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Self:
        """Inverse of `to_dict`."""
        return cls(**{f.name: raw[f.name] for f in dataclasses.fields(cls) if f.name in raw})


__all__ = [
    "ModelCapabilities",
    "ModelInput",
    "PayloadKind",
    "ReleaseKind",
    "ReleaseScale",
    "ScoreKind",
    "Serving",
]
