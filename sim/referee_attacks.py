"""The referee's scoring of attack outputs against the truth only it holds: one rule per kind.

Attacks (`adversary.attacks`) see only what the server observed. The referee compares their
per-user estimates with each user's true profile and reports each metric beside the baseline an
attacker gets for free, so that a report shows what the attack adds. An output's
`OutputKind` picks its scoring rule from `SCORERS`:

* ``z_hat``, ``genuine_score`` (RPT reconstruction, fake detection): `sim.referee_rpt`;
* ``rating_hat`` (the second-order reconstruction): `sim.referee_ratings`;
* ``item_set`` (Balu's decoders, the OUE decoder): `sim.referee_itemset`;
* ``sign_hat``, ``denormalised_hat``, ``bit_hat``, ``item_hat``, ``membership`` (the inference
  attacks): `sim.referee_inference`.

Each kind's headline figures (what the report draws, with its references) are declared here
too (`HEADLINES`), beside the table.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from privrec.adversary.attacks.base import AttackOutput, OutputKind
from privrec.adversary.knowledge import AdversaryKnowledge
from privrec.shared.mechanisms.base import Payload
from privrec.shared.run_config import PublicRunConfig
from privrec.sim.referee_cells import TruthProfiles
from privrec.sim.referee_inference import (
    score_bits,
    score_denormalised,
    score_items,
    score_membership,
    score_signs,
)
from privrec.sim.referee_itemset import score_item_set
from privrec.sim.referee_ratings import score_rating_hat
from privrec.sim.referee_rpt import score_detection, score_reconstruction


@dataclasses.dataclass(frozen=True)
class ScoringContext:
    """What a scoring rule may read besides the output and the truth (`score_attack`'s
    keyword arguments); a rule that needs a missing part says which."""

    name: str
    releases: Mapping[str, Payload] | None = None
    public: Mapping[str, Payload] | None = None
    n_items: int | None = None
    run_config: PublicRunConfig | None = None
    knowledge: AdversaryKnowledge | None = None
    members: Mapping[str, bool] | None = None


Scorer = Callable[[AttackOutput, TruthProfiles, ScoringContext], dict[str, float]]
"""A scoring rule: (output, truth, context) → metric name → value."""


def _item_set(output: AttackOutput, truth: TruthProfiles, ctx: ScoringContext) -> dict[str, float]:
    n_items = ctx.n_items
    if n_items is None and ctx.run_config is not None:
        n_items = ctx.run_config.n_items
    return score_item_set(output, truth, n_items)


def _bits(output: AttackOutput, truth: TruthProfiles, ctx: ScoringContext) -> dict[str, float]:
    if ctx.releases is None or ctx.run_config is None:
        raise ValueError(f"scoring {ctx.name!r} (kind 'bit_hat') needs releases and run_config")
    return score_bits(output, truth, ctx.releases, ctx.run_config)


def _items(output: AttackOutput, truth: TruthProfiles, ctx: ScoringContext) -> dict[str, float]:
    if ctx.knowledge is None or ctx.run_config is None:
        raise ValueError(f"scoring {ctx.name!r} (kind 'item_hat') needs knowledge and run_config")
    return score_items(output, truth, ctx.knowledge, ctx.run_config.n_items)


def _membership(
    output: AttackOutput, truth: TruthProfiles, ctx: ScoringContext
) -> dict[str, float]:
    if ctx.knowledge is None or ctx.members is None:
        raise ValueError(f"scoring {ctx.name!r} (kind 'membership') needs knowledge and members")
    return score_membership(output, ctx.knowledge, ctx.members)


SCORERS: dict[OutputKind, Scorer] = {
    OutputKind.Z_HAT: lambda out, truth, ctx: score_reconstruction(out, truth, ctx.releases),
    OutputKind.GENUINE_SCORE: lambda out, truth, ctx: score_detection(out, truth),
    OutputKind.RATING_HAT: lambda out, truth, ctx: score_rating_hat(out, truth, ctx.public),
    OutputKind.ITEM_SET: _item_set,
    OutputKind.SIGN_HAT: lambda out, truth, ctx: score_signs(out, truth, ctx.public),
    OutputKind.DENORMALISED_HAT: lambda out, truth, ctx: score_denormalised(out, truth),
    OutputKind.BIT_HAT: _bits,
    OutputKind.ITEM_HAT: _items,
    OutputKind.MEMBERSHIP: _membership,
}
"""The scoring rule of every output kind (a test checks that no kind is without one)."""


@dataclasses.dataclass(frozen=True)
class Headline:
    """One headline figure of an attack's scores, with what a reader compares it to.

    The report draws each headline on its own axis (`sim.figures.attacks_figure`): the attack's
    value beside each reference, so a metric is never drawn on the scale of a count.

    Attributes:
        metric: the key in the scores (e.g. ``"rmse_z"``).
        label: the axis label, what the number is (e.g. "RMSE of ẑ on genuine cells").
        better: "lower" or "higher": which way the attack succeeds.
        references: (key, label) of the free baselines and chance levels scored beside it,
            e.g. ``("rmse_z_naive", "naive ẑ = z′")``; keys missing from a run's scores are
            left out of its figure.
        unit_interval: the metric is a probability or rate in [0, 1] (drawn on [0, 1]).
    """

    metric: str
    label: str
    better: str
    references: tuple[tuple[str, str], ...] = ()
    unit_interval: bool = False


HEADLINES: dict[str, tuple[Headline, ...]] = {
    OutputKind.Z_HAT: (
        Headline(
            "rmse_z",
            "RMSE of ẑ on genuine cells",
            "lower",
            (("rmse_z_naive", "naive ẑ = z′"), ("rmse_z_zero", "know-nothing ẑ = 0")),
        ),
        Headline("mae_z", "MAE of ẑ on genuine cells", "lower", (("mae_z_naive", "naive ẑ = z′"),)),
    ),
    OutputKind.GENUINE_SCORE: (
        Headline(
            "auc", "ROC AUC, genuine vs fake cells", "higher", (("auc_baseline", "chance"),), True
        ),
        Headline(
            "top_g_precision",
            "precision of each user's top-g cells",
            "higher",
            (("top_g_precision_chance", "chance g/f"),),
            True,
        ),
        Headline("exact_list_rate", "users whose genuine list is exact", "higher", (), True),
    ),
    OutputKind.RATING_HAT: (
        Headline(
            "rmse",
            "RMSE of r̂ on rated items",
            "lower",
            (("rmse_mu", "public item means µ"), ("rmse_permuted", "another user's r̂")),
        ),
        Headline(
            "sign_accuracy",
            "sign accuracy of r̂ − µ",
            "higher",
            (("sign_accuracy_mu", "µ's constant +"), ("sign_accuracy_chance", "coin")),
            True,
        ),
        Headline(
            "sign_accuracy_global",
            "sign accuracy up to one global sign",
            "higher",
            (
                ("sign_accuracy_global_permuted", "another user's r̂"),
                ("sign_accuracy_global_chance", "binomial chance"),
            ),
            True,
        ),
    ),
    OutputKind.ITEM_HAT: (
        Headline(
            "precision_at_10",
            "precision of the top 10 inferred items",
            "higher",
            (
                ("precision_at_10_popularity", "10 most popular items"),
                ("precision_chance", "chance: unknown items at random"),
            ),
            True,
        ),
        Headline(
            "recall_at_10",
            "recall of her unknown items in the top 10",
            "higher",
            (("recall_at_10_popularity", "10 most popular items"),),
            True,
        ),
        Headline(
            "precision_inferred",
            "precision of every inferred item",
            "higher",
            (
                ("precision_inferred_popularity", "as many popular items"),
                ("precision_chance", "chance: unknown items at random"),
            ),
            True,
        ),
    ),
    OutputKind.ITEM_SET: (
        Headline(
            "cosine_mean",
            "set cosine of P̂ and P (Balu 3.36)",
            "higher",
            (("cosine_chance", "ĉ items at random"),),
            True,
        ),
        Headline(
            "map_at_10",
            "mAP@10 of item presence (Balu 3.37)",
            "higher",
            (("map_at_10_chance", "chance |P|/N"),),
            True,
        ),
    ),
    OutputKind.MEMBERSHIP: (
        Headline(
            "auc",
            "ROC AUC of the loss classifier, members vs not",
            "higher",
            (("auc_chance", "chance"),),
            True,
        ),
        Headline(
            "loss_members",
            "mean squared error of r̂ on members",
            "lower",
            (("loss_non_members", "on non-members"),),
        ),
        Headline(
            "kld",
            "KL of members' vs non-members' errors, nats (Balu 4.15)",
            "higher",
            (("kld_no_leak", "no leak"),),
        ),
    ),
}
"""The headline figures of each output kind, declared beside its scoring rule. A new kind adds
its entry here; a kind without one is drawn by the report's fallback (every non-count metric
beside the `<metric>_<naive|baseline|chance|…>` keys that share its name)."""


def score_attack(
    name: str,
    output: AttackOutput,
    truth: TruthProfiles,
    *,
    releases: Mapping[str, Payload] | None = None,
    public: Mapping[str, Payload] | None = None,
    n_items: int | None = None,
    run_config: PublicRunConfig | None = None,
    knowledge: AdversaryKnowledge | None = None,
    members: Mapping[str, bool] | None = None,
) -> dict[str, float]:
    """Score one attack's output against the truth.

    Args:
        name: the attack's registry name; must match `output.attack`.
        output: the attack's fitted output.
        truth: user id → (item indices, true ratings) of the profile each user released;
            users absent from it are skipped.
        releases: the observed profile releases (`Observations.profiles`); needed for the naive
            baseline of a reconstruction.
        public: the public users' openly shared ratings (`Observations.public`); required for
            kind "rating_hat" (its µ baseline and signs), unused otherwise.
        n_items: N, the catalogue size (kind "item_set": chance levels and the presence AUC
            over all items); when None, the largest item index seen + 1.
        run_config: the public run config (kinds "bit_hat" and "item_hat").
        knowledge: the adversary's stated side knowledge (kinds "item_hat", "membership").
        members: membership candidate label → True when in the run (kind "membership").

    Returns:
        metric name → value (see the module of the kind's rule, `SCORERS`).

    Raises:
        ValueError: the output is of another attack or kind, shares no cell with the truth, or
            is a "rating_hat" output scored without `public`.
    """
    if output.attack != name:
        raise ValueError(f"output is of attack {output.attack!r}, not {name!r}")
    scorer = SCORERS.get(output.kind)
    if scorer is None:
        raise ValueError(f"no scoring rule for output kind {output.kind.value!r} of {name!r}")
    context = ScoringContext(name, releases, public, n_items, run_config, knowledge, members)
    return scorer(output, truth, context)


__all__ = [
    "HEADLINES",
    "SCORERS",
    "Headline",
    "Scorer",
    "ScoringContext",
    "score_attack",
]
