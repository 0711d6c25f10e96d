"""The experiment configuration: one TOML file, nine sections, every key defaulted.

Sections `[run] [data] [population] [mechanism] [model] [adversary] [evaluation] [transport]
[control]` (README, "Configuration"; `[evaluation]` added by issue 25). Unknown sections and keys
are errors that name the key; values are validated in `__post_init__` and errors echo the value.
`ExperimentConfig.to_toml()` writes the resolved configuration that lands in each run directory
as `config.toml`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Self

from privrec.shared.errors import ConfigError
from privrec.shared.files import read_toml


def _check(cond: bool, key: str, message: str, value: object) -> None:
    if not cond:
        raise ConfigError(f"{key}: {message}, got {value!r}")


@dataclasses.dataclass(frozen=True)
class RunSection:
    """[run]: identity and randomness of the run."""

    name: str = "default"
    seed: int = 0

    def __post_init__(self) -> None:
        _check(
            isinstance(self.seed, int) and self.seed >= 0,
            "run.seed",
            "must be an int >= 0",
            self.seed,
        )
        _check(
            isinstance(self.name, str) and self.name != "",
            "run.name",
            "must be a non-empty string",
            self.name,
        )


@dataclasses.dataclass(frozen=True)
class DataSection:
    """[data]: which ratings, and the evaluation protocol (Bilge §2.4).

    `dataset` is "ml-100k", "synthetic" or a path (ML-100K directory, ML-1M ratings.dat, CSV).
    Every user is a test user in exactly one of `n_folds` folds; `withheld` of her ratings are
    hidden from her query vector and predicted.
    """

    dataset: str = "ml-100k"
    n_folds: int = 5
    withheld: int = 5
    max_users: int = 0  # 0 = all users; otherwise the first max_users users (for quick runs)
    synthetic_users: int = 2000
    synthetic_items: int = 1000
    synthetic_genres: int = 0  # genre flags of synthetic items (feature-based models need some)
    binarise: float = 0.0  # > 0: ratings >= binarise become 1, the rest dropped (implicit)
    min_user_ratings: int = 0  # k-core: users with fewer ratings are dropped, repeatedly ...
    min_item_ratings: int = 0  # ... with items with fewer ratings (shared.data.filters)

    def __post_init__(self) -> None:
        _check(
            isinstance(self.n_folds, int) and self.n_folds >= 2,
            "data.n_folds",
            "must be an int >= 2",
            self.n_folds,
        )
        _check(
            isinstance(self.withheld, int) and self.withheld >= 1,
            "data.withheld",
            "must be an int >= 1",
            self.withheld,
        )
        _check(
            isinstance(self.max_users, int) and self.max_users >= 0,
            "data.max_users",
            "must be an int >= 0",
            self.max_users,
        )
        for key in ("synthetic_users", "synthetic_items"):
            v = getattr(self, key)
            _check(isinstance(v, int) and v >= 10, f"data.{key}", "must be an int >= 10", v)
        _check(
            isinstance(self.synthetic_genres, int) and self.synthetic_genres >= 0,
            "data.synthetic_genres",
            "must be an int >= 0",
            self.synthetic_genres,
        )
        for key in ("min_user_ratings", "min_item_ratings"):
            v = getattr(self, key)
            _check(
                isinstance(v, int) and not isinstance(v, bool) and v >= 0,
                f"data.{key}",
                "must be an int >= 0",
                v,
            )
        _check(
            isinstance(self.binarise, int | float)
            and not isinstance(self.binarise, bool)
            and 0 <= self.binarise < float("inf"),
            "data.binarise",
            "must be a number >= 0 (0 = keep the ratings)",
            self.binarise,
        )


@dataclasses.dataclass(frozen=True)
class PopulationSection:
    """[population]: how the users are hosted by client shards, and who is public.

    `public_users` users form the public tier of a two-tier run (Xin & Jaakkola Sec. 5: "the
    top 100 users by number of ratings"): they share their ratings openly; everyone else is
    private. `public_selection` is "most-ratings" (the paper's choice; ties by row) or
    "random" (seeded by the run seed). `private_round_size` private users release per round,
    the server re-publishing (µ, V) between rounds (the paper: w = 20; 0 = one round); the
    users with the most ratings go first ("private users with more ratings are added first").
    """

    shards: int = 2
    concurrency: int = 128  # users in flight per shard: concurrency // batch_size batches
    batch_size: int = 64  # releases per SubmitStream message
    public_users: int = 0
    public_selection: str = "most-ratings"
    private_round_size: int = 0

    def __post_init__(self) -> None:
        for key in ("shards", "concurrency", "batch_size"):
            v = getattr(self, key)
            _check(
                isinstance(v, int) and 1 <= v <= 100_000,
                f"population.{key}",
                "must be an int in [1, 100000]",
                v,
            )
        _check(
            isinstance(self.public_users, int) and self.public_users >= 0,
            "population.public_users",
            "must be an int >= 0",
            self.public_users,
        )
        _check(
            isinstance(self.private_round_size, int) and self.private_round_size >= 0,
            "population.private_round_size",
            "must be an int >= 0",
            self.private_round_size,
        )
        _check(
            self.public_selection in ("most-ratings", "random"),
            "population.public_selection",
            'must be "most-ratings" or "random"',
            self.public_selection,
        )


@dataclasses.dataclass(frozen=True)
class MechanismSection:
    """[mechanism]: the client-side perturbation and its public parameters.

    `[mechanism.params]` holds the mechanism's keyword arguments; any left out take the
    mechanism's own defaults (RPT: σ_max = 2, β_max = 25), never another mechanism's.
    """

    name: str = "rpt"
    params: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        _check(isinstance(self.params, dict), "mechanism.params", "must be a table", self.params)


@dataclasses.dataclass(frozen=True)
class ModelSection:
    """[model]: the aggregator's recommender and the client's post-processing.

    `k` is the model's size: neighbours for the kNN models, the rank for `two_tier_lowrank`.
    `[model.params]` passes the model's other hyper-parameters by name (e.g. `ridge`).
    """

    name: str = "ppcf"
    k: int = 100
    clip: bool = True  # clip predictions to the rating scale
    baseline: bool = True  # also score the non-private Pearson kNN on true data
    params: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        _check(
            isinstance(self.params, dict) and "k" not in self.params,
            "model.params",
            "must be a table without `k` (set [model].k)",
            self.params,
        )
        _check(isinstance(self.k, int) and self.k >= 1, "model.k", "must be an int >= 1", self.k)
        _check(isinstance(self.clip, bool), "model.clip", "must be true or false", self.clip)
        _check(
            isinstance(self.baseline, bool),
            "model.baseline",
            "must be true or false",
            self.baseline,
        )


@dataclasses.dataclass(frozen=True)
class AdversarySection:
    """[adversary]: which attacks run and what side knowledge they get.

    `auxiliary = "popularity"` hands the adversary the raw profiles of `auxiliary_users` users
    of the population, a uniform sample seeded by the run seed (Balu §3.5.1: 600 "training"
    users of ML-100K's 943, used only to estimate item popularity); those users still take part
    in the protocol, but attacks skip them and the referee does not score them, so the other
    users (Balu's 343 "testing" users) are the attacked ones. "none": no side knowledge.
    `outside_users` instead hands it the raw profiles of that many users outside the run (the
    dataset's rows after the population, `sim.adversary_knowledge`); one or the other.

    `targets`: how many users the attacks are scored on (`sim.auxiliary.attack_target_rows`):
    0, the default, attacks every user up to ML-1M's 6,040 (the thesis protocol: no published
    figure moves) and a seeded 10,000 above; N > 0 a seeded sample of N (every user when N is
    at least the population). The attacks still read every observed release; only their
    outputs and scores are for the targets.

    `fit_users` is the number of users whose releases the attacks fit their population-level
    parameters on (item priors, spectral bases, low-rank factors, noise variances:
    `sim.auxiliary.attack_fit_rows`): 0, the default, fits on every observed release up to
    ML-1M's size and on a seeded sample of 20,000 users above it; N > 0 a sample of N. The
    sample always holds every attack target (and auxiliary user), so each target's estimate
    comes from the fit; it applies only when targets are sampled and every attack of the run
    is scored per attacked user (`adversary.attacks.base.Attack.fits_on_sample`).
    """

    attacks: tuple[str, ...] = ("rpt_spectral", "rpt_bayes", "rpt_fake_detection")
    auxiliary: str = "none"  # "none" or "popularity" (raw profiles of `auxiliary_users` users)
    auxiliary_users: int = 600  # Balu §3.5.1, Table 3.1: 600 of ML-100K's 943 users
    live: bool = True  # an adversary node follows the observation feed during the run
    # Side knowledge the experiment gives the adversary (adversary.knowledge), and its sybils
    # (adversary.sybils): raw profiles of users outside the run; kNN targets with m known
    # ratings and the crowd of sybils per target (0 = the model's k − 1); membership
    # candidates (this many in the run and this many outside) with their known ratings.
    outside_users: int = 0
    knn_targets: int = 0
    knn_known_items: int = 8
    knn_sybils: int = 0
    knn_recommend: int = 50
    knn_queries: int = 1  # Recommend queries per target (> 1 against a randomised model)
    membership_candidates: int = 0
    membership_known_items: int = 20
    membership_probe_items: int = 5
    targets: int = 0  # attacked and scored users; 0 = every user up to ML-1M's size
    fit_users: int = 0  # users the attacks fit on; 0 = every user up to ML-1M's size, 20,000 above

    def __post_init__(self) -> None:
        for key, low in (
            ("outside_users", 0),
            ("targets", 0),
            ("fit_users", 0),
            ("knn_targets", 0),
            ("knn_known_items", 1),
            ("knn_sybils", 0),
            ("knn_recommend", 1),
            ("knn_queries", 1),
            ("membership_candidates", 0),
            ("membership_known_items", 3),
            ("membership_probe_items", 1),
        ):
            v = getattr(self, key)
            _check(
                isinstance(v, int) and v >= low, f"adversary.{key}", f"must be an int >= {low}", v
            )
        _check(
            self.membership_probe_items + 2 <= self.membership_known_items,
            "adversary.membership_probe_items",
            "must leave at least 2 known ratings for the query (<= membership_known_items - 2)",
            self.membership_probe_items,
        )
        _check(
            self.knn_recommend <= 1000,
            "adversary.knn_recommend",
            "must be <= 1000 (the server's Recommend limit)",
            self.knn_recommend,
        )
        _check(
            isinstance(self.attacks, tuple | list),
            "adversary.attacks",
            "must be a list",
            self.attacks,
        )
        object.__setattr__(self, "attacks", tuple(self.attacks))
        _check(
            self.auxiliary in ("none", "popularity"),
            "adversary.auxiliary",
            'must be "none" or "popularity"',
            self.auxiliary,
        )
        _check(
            isinstance(self.auxiliary_users, int) and self.auxiliary_users >= 1,
            "adversary.auxiliary_users",
            "must be an int >= 1",
            self.auxiliary_users,
        )
        _check(
            self.auxiliary == "none" or self.outside_users == 0,
            "adversary.outside_users",
            "the auxiliary profiles come from one place: users of the run "
            '(auxiliary = "popularity", auxiliary_users) or users outside it (outside_users); '
            "set one",
            self.outside_users,
        )


@dataclasses.dataclass(frozen=True)
class EvaluationSection:
    """[evaluation]: which users are tested (the referee's side of the protocol).

    `test_users` = N draws N test users uniformly among the users who can withhold ratings
    (stream ``("evaluation", "test-users")`` of the run seed); the others only release and
    train. 0 (the default) tests every user who can (Bilge §2.4) up to 6,040 users and draws
    10,000 above (`shared.population.tested_user_count`). A drawn user withholds the same
    ratings as without the draw, so a sampled run scores a subset of the full run's cells.

    `split` names how the test cells are chosen (`shared.data.splits`): "thesis" (the
    default and the papers' protocol: each test user withholds `[data] withheld` ratings from
    her query and releases her whole profile, the model answering her leaves her fold out,
    `[data] n_folds`), or a split whose test cells are never released, the model answering
    from everyone's training ratings: "ratio" (per user, `ratio_train` / `ratio_validation` /
    the rest, at random), "leave-one-out" (per user, her latest rating), "temporal" (the
    latest `temporal_test` share of all ratings) or "file" (the cells listed in
    `split_file`). Validation cells are set aside: neither released nor scored.

    `ranking` scores the model's ranking (`sim.referee_ranking`): precision, recall, NDCG,
    hit rate and MRR at each K of `ranking_k`, catalogue coverage and average recommendation
    popularity (`shared.ranking_metrics`), a test item being relevant when its rating is at
    least `relevance_threshold`. The candidates are every item the test user has not rated
    in training ("all", full ranking) or her test items and `negatives` items she never
    rated, drawn per user ("sampled"; the draw is written to the run directory). `trivial`
    scores the global, user and item means and the popularity ranking on the same training
    ratings (`sim.referee_trivial`).
    """

    test_users: int = 0
    split: str = "thesis"  # "thesis", "ratio", "leave-one-out", "temporal" or "file"
    ratio_train: float = 0.8  # "ratio": each user's share of training ratings
    ratio_validation: float = 0.1  # "ratio": her share set aside (the rest is her test set)
    temporal_test: float = 0.2  # "temporal": the latest share of all ratings is the test set
    split_file: str = ""  # "file": the test cells, one "user_id,item_id" line each
    ranking: bool = True  # score the model's ranking of each test user's candidates
    ranking_k: tuple[int, ...] = (10, 20)  # the cut-offs K of the ranking metrics
    relevance_threshold: float = 4.0  # a test rating >= this is relevant (MovieLens: 4 and 5)
    candidates: str = "all"  # "all" unrated items, or "sampled": test items + `negatives`
    negatives: int = 100  # unrated items drawn per test user when candidates = "sampled"
    trivial: bool = True  # score the trivial predictors (means, popularity) beside the model

    def __post_init__(self) -> None:
        _check(
            isinstance(self.test_users, int) and self.test_users >= 0,
            "evaluation.test_users",
            "must be an int >= 0 (0 = every user)",
            self.test_users,
        )
        splits = ("thesis", "ratio", "leave-one-out", "temporal", "file")
        _check(self.split in splits, "evaluation.split", f"must be one of {splits}", self.split)
        _check(
            0.0 < self.ratio_train < 1.0
            and self.ratio_validation >= 0.0
            and self.ratio_train + self.ratio_validation < 1.0,
            "evaluation.ratio_train",
            "must be in (0, 1) and leave a test share beside ratio_validation (>= 0)",
            (self.ratio_train, self.ratio_validation),
        )
        _check(
            0.0 < self.temporal_test < 1.0,
            "evaluation.temporal_test",
            "must be in (0, 1)",
            self.temporal_test,
        )
        _check(
            (self.split == "file") == bool(self.split_file),
            "evaluation.split_file",
            'is set exactly when split = "file"',
            self.split_file,
        )
        object.__setattr__(self, "ranking_k", tuple(self.ranking_k))
        _check(
            bool(self.ranking_k)
            and all(isinstance(k, int) and not isinstance(k, bool) for k in self.ranking_k)
            and min(self.ranking_k) >= 1
            and max(self.ranking_k) <= 1000,
            "evaluation.ranking_k",
            "must be a non-empty list of ints in [1, 1000]",
            list(self.ranking_k),
        )
        _check(
            self.candidates in ("all", "sampled"),
            "evaluation.candidates",
            'must be "all" or "sampled"',
            self.candidates,
        )
        _check(
            isinstance(self.negatives, int) and self.negatives >= 1,
            "evaluation.negatives",
            "must be an int >= 1",
            self.negatives,
        )
        for key in ("ranking", "trivial"):
            v = getattr(self, key)
            _check(isinstance(v, bool), f"evaluation.{key}", "must be true or false", v)


@dataclasses.dataclass(frozen=True)
class TransportSection:
    """[transport]: gRPC and the server's store."""

    host: str = "127.0.0.1"
    port: int = 0  # 0 = pick a free port
    max_release_bytes: int = 4 * 1024 * 1024
    deadline_s: float = 30.0
    retries: int = 1000  # a cap; retry_deadline_s normally ends the retries first
    backoff_s: float = 0.2
    max_batch_bytes: int = 16 * 1024 * 1024  # one ReleaseBatch of a SubmitStream
    max_in_flight: int = 1024  # user requests the server holds at once (then "busy")
    retry_deadline_s: float = 180.0  # clients retry transient failures this long (> a restart)
    max_backoff_s: float = 5.0

    def __post_init__(self) -> None:
        _check(
            isinstance(self.port, int) and 0 <= self.port < 65536,
            "transport.port",
            "must be an int in [0, 65535]",
            self.port,
        )
        _check(
            isinstance(self.max_release_bytes, int) and self.max_release_bytes >= 1024,
            "transport.max_release_bytes",
            "must be an int >= 1024",
            self.max_release_bytes,
        )
        _check(self.deadline_s > 0, "transport.deadline_s", "must be > 0", self.deadline_s)
        _check(
            isinstance(self.retries, int) and self.retries >= 0,
            "transport.retries",
            "must be an int >= 0",
            self.retries,
        )
        _check(
            isinstance(self.max_batch_bytes, int) and self.max_batch_bytes >= 1024,
            "transport.max_batch_bytes",
            "must be an int >= 1024",
            self.max_batch_bytes,
        )
        _check(
            isinstance(self.max_in_flight, int) and self.max_in_flight >= 1,
            "transport.max_in_flight",
            "must be an int >= 1",
            self.max_in_flight,
        )
        _check(
            self.retry_deadline_s > 0,
            "transport.retry_deadline_s",
            "must be > 0",
            self.retry_deadline_s,
        )
        _check(self.max_backoff_s > 0, "transport.max_backoff_s", "must be > 0", self.max_backoff_s)


@dataclasses.dataclass(frozen=True)
class ControlSection:
    """[control]: the MQTT control plane.

    `mqtt` is the broker of a `privrec sim` run: "embedded" (amqtt, started and stopped by the
    run), "none" (nodes poll, attacks run by replay) or a broker's mqtt://host:port
    (mqtts:// with TLS); `privrec sim --mqtt` overrides it. `phase_poll_s` is how often a node
    without a broker asks the server for the phase.
    """

    mqtt: str = "embedded"
    phase_poll_s: float = 0.1

    def __post_init__(self) -> None:
        _check(
            self.mqtt in ("embedded", "none") or self.mqtt.startswith(("mqtt://", "mqtts://")),
            "control.mqtt",
            'must be "embedded", "none", mqtt://host:port or mqtts://host:port',
            self.mqtt,
        )


SECTIONS: dict[str, type] = {
    "run": RunSection,
    "data": DataSection,
    "population": PopulationSection,
    "mechanism": MechanismSection,
    "model": ModelSection,
    "adversary": AdversarySection,
    "evaluation": EvaluationSection,
    "transport": TransportSection,
    "control": ControlSection,
}


@dataclasses.dataclass(frozen=True)
class ExperimentConfig:
    """The whole experiment configuration."""

    run: RunSection = dataclasses.field(default_factory=RunSection)
    data: DataSection = dataclasses.field(default_factory=DataSection)
    population: PopulationSection = dataclasses.field(default_factory=PopulationSection)
    mechanism: MechanismSection = dataclasses.field(default_factory=MechanismSection)
    model: ModelSection = dataclasses.field(default_factory=ModelSection)
    adversary: AdversarySection = dataclasses.field(default_factory=AdversarySection)
    evaluation: EvaluationSection = dataclasses.field(default_factory=EvaluationSection)
    transport: TransportSection = dataclasses.field(default_factory=TransportSection)
    control: ControlSection = dataclasses.field(default_factory=ControlSection)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Self:
        """Build from a parsed TOML document; unknown sections/keys raise ConfigError."""
        sections: dict[str, Any] = {}
        for name, body in raw.items():
            if name == "sweep":
                raise ConfigError(
                    "[sweep] describes a study, not one run: run it with "
                    "`privrec sweep --config FILE`"
                )
            if name not in SECTIONS:
                raise ConfigError(f"unknown section [{name}]; known: {sorted(SECTIONS)}")
            if not isinstance(body, dict):
                raise ConfigError(f"[{name}] must be a table, got {body!r}")
            section_cls = SECTIONS[name]
            known = {f.name: f for f in dataclasses.fields(section_cls)}
            for key, value in body.items():
                if key not in known:
                    raise ConfigError(f"{name}.{key}: unknown key; known: {sorted(known)}")
                _check_type(f"{name}.{key}", value, known[key])
            try:
                sections[name] = section_cls(**body)
            except TypeError as exc:
                raise ConfigError(f"[{name}]: {exc}") from exc
        return cls(**sections)

    @classmethod
    def load(cls, path: str | Path) -> Self:
        """Read a TOML file (errors name the file and the key)."""
        return cls.from_dict(read_toml(path))

    def replace(self, section: str, **changes: Any) -> Self:
        """A copy with `changes` applied to one section (validated again)."""
        return dataclasses.replace(
            self, **{section: dataclasses.replace(getattr(self, section), **changes)}
        )

    def to_dict(self) -> dict[str, Any]:
        """Every section as a plain dict, keyed by section name."""
        return {name: dataclasses.asdict(getattr(self, name)) for name in SECTIONS}

    def to_toml(self) -> str:
        """The resolved configuration as TOML (round-trips through `from_dict`), written by
        `tomli_w` (a value TOML cannot hold, e.g. None, is a TypeError)."""
        import tomli_w

        try:
            return tomli_w.dumps(self.to_dict())
        except TypeError as exc:
            raise TypeError(f"cannot write the configuration as TOML: {exc}") from exc


def _check_type(key: str, value: object, field: dataclasses.Field[Any]) -> None:
    if field.default is not dataclasses.MISSING:
        default: object = field.default
    else:
        assert field.default_factory is not dataclasses.MISSING  # every config field has one
        default = field.default_factory()
    if isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(default, float):
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    elif isinstance(default, str):
        ok = isinstance(value, str)
    elif isinstance(default, tuple | list):
        kind = type(default[0]) if default else str  # the elements' type, as the default's
        ok = isinstance(value, list | tuple) and all(
            isinstance(v, kind) and not isinstance(v, bool) for v in value
        )
    else:
        ok = isinstance(value, dict)
    if not ok:
        raise ConfigError(f"{key}: expected {type(default).__name__}, got {value!r}")


__all__ = ["SECTIONS", "ExperimentConfig"]
