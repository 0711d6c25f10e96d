"""The public run configuration: everything about a run that every node, the adversary
included, may know.

The server builds one `PublicRunConfig` when it starts, stores it (JSON) beside its transcript
and publishes it through `GetRunConfig` (`to_proto`); clients, the live adversary, `replay`, the
referee and the audit read it back (`from_proto`, `from_json`) and rebuild the mechanism the
users run from the published parameters (`mechanism()`). It is the one typed place these facts
live; nothing else parses them out of loose dictionaries.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any, Self

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from privrec.shared.capabilities import ModelCapabilities, ScoreKind, Serving
from privrec.shared.errors import ValidationError
from privrec.shared.identity import public_keys
from privrec.shared.mechanisms import make_mechanism
from privrec.shared.mechanisms.base import Mechanism
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb

TIER_NAMES = ("private", "public")


@dataclasses.dataclass(frozen=True)
class PublicRunConfig:
    """The static public facts of a run (phase and round change; they travel beside it).

    Attributes:
        run_id: the run's id.
        mechanism_name: the private tier's release mechanism (registry name).
        public_params: its public parameters (`Mechanism.public_params()`), JSON-able.
        model_name: the aggregator's model (registry name).
        model_params: its hyper-parameters, JSON-able.
        capabilities: what the model declares (`ModelCapabilities`).
        n_items: m, the catalogue size.
        dataset: the dataset's name (public metadata).
        rating_scale: (lowest, highest) rating.
        n_folds: folds of the public fold rule (`shared.protocol.fold_of`); 0 under a named
            split (`[evaluation] split`): users release only their training ratings and no
            fold is left out of an answer.
        fold_seed: its seed.
        withheld: ratings each test user withholds and predicts.
        max_release_bytes: the largest release the server accepts.
        tiers: "private", plus "public" when the model has a public tier.
        allowed_payloads: the `Release.payload` fields the server accepts.
        control_keys: who signs the run's control messages (phase announcements): signer →
            base64 of its Ed25519 public key (`shared.control.announcements`); empty in an
            insecure run.
    """

    run_id: str
    mechanism_name: str
    public_params: Mapping[str, Any]
    model_name: str
    model_params: Mapping[str, Any]
    capabilities: ModelCapabilities
    n_items: int
    dataset: str
    rating_scale: tuple[float, float]
    n_folds: int
    fold_seed: int
    withheld: int
    max_release_bytes: int
    tiers: tuple[str, ...] = ("private",)
    allowed_payloads: tuple[str, ...] = ()
    control_keys: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "control_keys", dict(sorted(self.control_keys.items())))
        object.__setattr__(self, "public_params", dict(self.public_params))
        object.__setattr__(self, "model_params", dict(self.model_params))
        object.__setattr__(self, "rating_scale", tuple(float(x) for x in self.rating_scale))
        object.__setattr__(self, "tiers", tuple(self.tiers))
        object.__setattr__(self, "allowed_payloads", tuple(self.allowed_payloads))
        unknown = set(self.tiers) - set(TIER_NAMES)
        if unknown:
            raise ValidationError("tiers", f"unknown tiers {sorted(unknown)}")

    # ------------------------------------------------------------------ derived facts
    def control_public_keys(self) -> dict[str, Ed25519PublicKey]:
        """The decoded `control_keys`, for `ControlPlane(control_keys=...)`.

        Raises:
            ConfigError: a key is not a valid Ed25519 public key.
        """
        return public_keys(self.control_keys, "run config control_keys")

    def mechanism(self) -> Mechanism:
        """A fresh instance of the mechanism the private users run, from the public
        parameters (unbound: a second-order mechanism still needs the published model)."""
        return make_mechanism(self.mechanism_name, self.public_params)

    @property
    def answers_queries(self) -> bool:
        """Whether test users query the server (`Serving.QUERIES`)."""
        return self.capabilities.serving is Serving.QUERIES

    @property
    def local_prediction(self) -> bool:
        """Whether each user predicts locally from the published model (`Serving.LOCAL`)."""
        return self.capabilities.serving is Serving.LOCAL

    @property
    def holdout(self) -> bool:
        """Whether users release only their training ratings (their test ratings never leave
        them): two-tier runs, and runs under a named split (no fold rule)."""
        return self.local_prediction or self.n_folds == 0

    @property
    def two_tier(self) -> bool:
        """Whether the run has a public tier (Xin & Jaakkola's public users)."""
        return "public" in self.tiers

    @property
    def score_kind(self) -> ScoreKind:
        """What the model's scores are (`ScoreKind`: z-score, rating, probability, ...)."""
        return self.capabilities.scores

    # ------------------------------------------------------------------ JSON (the store)
    def to_dict(self) -> dict[str, Any]:
        """JSON-able form; `from_dict` inverts it."""
        out = dataclasses.asdict(self)
        out["capabilities"] = self.capabilities.to_dict()
        out["rating_scale"] = list(self.rating_scale)
        out["tiers"] = list(self.tiers)
        out["allowed_payloads"] = list(self.allowed_payloads)
        out["control_keys"] = dict(self.control_keys)
        return out

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Self:
        """Inverse of `to_dict`.

        Raises:
            ValidationError: a field is missing or malformed (naming it).
        """
        fields = {f.name for f in dataclasses.fields(cls)}
        missing = sorted(
            f.name
            for f in dataclasses.fields(cls)
            if f.name not in raw and f.default is dataclasses.MISSING
        )
        if missing:
            raise ValidationError("run_config", f"missing fields {missing}")
        body = {k: v for k, v in raw.items() if k in fields}
        try:
            body["capabilities"] = ModelCapabilities.from_dict(raw["capabilities"])
            body["rating_scale"] = tuple(raw["rating_scale"])
        except (TypeError, ValueError, KeyError) as exc:
            raise ValidationError("run_config", f"malformed: {exc}") from exc
        return cls(**body)

    def to_json(self) -> str:
        """The run config as canonical JSON (sorted keys)."""
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Self:
        """Read a run config written by `to_json`; refuses text that is not one."""
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValidationError("run_config", f"not JSON: {exc}") from exc
        if not isinstance(raw, dict):
            raise ValidationError("run_config", f"must be a JSON object, got {type(raw)}")
        return cls.from_dict(raw)

    # ------------------------------------------------------------------ the wire
    def to_proto(self, *, phase: str = "", round_: int = 0) -> pb.RunConfig:
        """The `GetRunConfig` answer, with the run's current phase and collect round."""
        caps = self.capabilities
        return pb.RunConfig(
            run_id=self.run_id,
            phase=phase,
            round=round_,
            mechanism=self.mechanism_name,
            public_params_json=json.dumps(self.public_params, sort_keys=True),
            model=self.model_name,
            model_info=pb.ModelInfo(
                consumes=str(caps.consumes),
                serving=str(caps.serving),
                scores=str(caps.scores),
                local_predictor=caps.local_predictor,
                publishes=caps.publishes,
                params_json=json.dumps(self.model_params, sort_keys=True),
            ),
            n_items=self.n_items,
            dataset=self.dataset,
            rating_min=self.rating_scale[0],
            rating_max=self.rating_scale[1],
            n_folds=self.n_folds,
            fold_seed=self.fold_seed,
            withheld=self.withheld,
            max_release_bytes=self.max_release_bytes,
            tiers=list(self.tiers),
            allowed_payloads=list(self.allowed_payloads),
            control_keys=dict(self.control_keys),
        )

    @classmethod
    def from_proto(cls, rc: pb.RunConfig) -> Self:
        """The static part of a `GetRunConfig` answer (its phase and round are `rc.phase`,
        `rc.round`).

        Raises:
            ValidationError: a JSON field does not decode or a declaration is unknown.
        """
        info = rc.model_info
        try:
            caps = ModelCapabilities(
                consumes=info.consumes,  # type: ignore[arg-type]  # validated in __post_init__
                serving=info.serving,  # type: ignore[arg-type]
                scores=info.scores,  # type: ignore[arg-type]
                local_predictor=info.local_predictor,
                publishes=info.publishes,
            )
        except ValueError as exc:
            raise ValidationError("model_info", str(exc)) from exc
        return cls(
            run_id=rc.run_id,
            mechanism_name=rc.mechanism,
            public_params=_json_object("public_params_json", rc.public_params_json),
            model_name=rc.model,
            model_params=_json_object("model_info.params_json", info.params_json),
            capabilities=caps,
            n_items=rc.n_items,
            dataset=rc.dataset,
            rating_scale=(rc.rating_min, rc.rating_max),
            n_folds=rc.n_folds,
            fold_seed=rc.fold_seed,
            withheld=rc.withheld,
            max_release_bytes=rc.max_release_bytes,
            tiers=tuple(rc.tiers),
            allowed_payloads=tuple(rc.allowed_payloads),
            control_keys=dict(rc.control_keys),
        )


def _json_object(field: str, text: str) -> dict[str, Any]:
    try:
        value = json.loads(text or "{}")
    except json.JSONDecodeError as exc:
        raise ValidationError(field, f"not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise ValidationError(field, f"must be a JSON object, got {text!r}")
    return value


__all__ = ["TIER_NAMES", "PublicRunConfig"]
