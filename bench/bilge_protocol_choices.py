"""Which protocol choice moves Bilge's base CF/PPCF figures (Table 6.3/6.4, c = 1; Table 6.5)?

The thesis prints CF 0.7519 (Pearson kNN, k = 100, 5-fold over users, 5 withheld ratings) and
PPCF 0.7967–0.7980 at σ_max = 1, β_max = 25 (Table 6.4, c = 1). privrec's PPCF gets ≈ 0.77.
This bench runs the protocol's own classes (`sim.reproduce.protocol_run.ProtocolRun`: every release
and query exactly as in `privrec sim`) and varies one choice at a time:

* the neighbour rule (`server.models.neighbourhood`): "raters" (privrec's default), "top-k"
  (the thesis's text read literally), "absolute" (|w| ranking, Σ|w| denominator);
* clipping the de-normalised prediction to [1, 5] or not;
* fold handling: 5 folds (Ch. 6) or 10 (Ch. 7) — the training share of the population — and
  (`--split-after-disguise`) the thesis's literal order "the data set (U or U′) is divided
  into five subsets": the active user's query is her own row of U′ (the disguise she released,
  her z-scores and statistics taken over her whole profile) minus the withheld cells, instead
  of a fresh disguise of her remaining ratings;
* test-set size: `--withheld` ratings per test user (5 in the thesis);
* σ_max (Table 6.5's sweep) for PPCF.

Every row is the mean (± sd) over seeds; each seed redraws folds, withheld items and releases.

Run::

    .venv/bin/python bench/bilge_protocol_choices.py [--seeds 3] [--sigmas 1] [--folds 5 10]
        [--withheld 5] [--rules raters top-k absolute] [--split-after-disguise] [--no-cf]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

import numpy as np

from privrec.shared.config import ExperimentConfig
from privrec.shared.metrics import mae
from privrec.shared.zscores import denormalise, zscore
from privrec.sim.reproduce.protocol_run import ProtocolRun

RULES = ("raters", "top-k", "absolute")


def config(seed: int, folds: int, sigma: float | None, withheld: int = 5) -> ExperimentConfig:
    mechanism = (
        {"name": "raw"}
        if sigma is None
        else {"name": "rpt", "params": {"sigma_max": sigma, "beta_max": 25}}
    )
    return ExperimentConfig.from_dict(
        {
            "run": {"name": "bench-choices", "seed": seed},
            "data": {"n_folds": folds, "withheld": withheld},
            "mechanism": mechanism,
            "model": {"name": "ppcf" if sigma is not None else "pearson_knn", "k": 100},
            "adversary": {"attacks": []},
        }
    )


def split_after_disguise(run: ProtocolRun, model_name: str, rule: str) -> tuple[float, float]:
    """MAE (clipped, unclipped) when each active user queries with her own released row of U′
    minus the withheld cells and de-normalises with her whole profile's statistics."""
    model = run.build(model_name, {"clusters": 1, "neighbours": rule})
    train = run.train_matrix(model_name)
    model.fit(train, exclude_groups=run.groups)
    row_of = {u: i for i, u in enumerate(run.user_ids)}
    clipped, raw = [], []
    for agent, items, g in zip(run.testers, run.items, run.exclude, strict=True):
        r = row_of[agent.user_id]
        idx = train.indices[train.indptr[r] : train.indptr[r + 1]]
        val = train.data[train.indptr[r] : train.indptr[r + 1]]
        keep = ~np.isin(idx, items)
        scores, _ = model.predict(idx[keep].astype(np.int64), val[keep], items, exclude_group=g)
        z = zscore(agent.profile.ratings)
        raw.append(denormalise(scores, z.mean, z.std))
        clipped.append(denormalise(scores, z.mean, z.std, clip=run.data.rating_scale))
    return mae(np.concatenate(clipped), run.truth), mae(np.concatenate(raw), run.truth)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--sigmas", type=float, nargs="*", default=[1.0])
    parser.add_argument("--folds", type=int, nargs="*", default=[5, 10])
    parser.add_argument("--withheld", type=int, default=5)
    parser.add_argument("--rules", nargs="*", default=list(RULES), choices=RULES)
    parser.add_argument("--split-after-disguise", action="store_true")
    parser.add_argument("--no-cf", action="store_true", help="PPCF rows only")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    rows: dict[tuple[str, int, str], list[tuple[float, float, float]]] = {}
    schemes: list[tuple[str, float | None]] = [] if args.no_cf else [("CF", None)]
    schemes += [(f"PPCF σ_max={s:g}", s) for s in args.sigmas]
    for seed in range(args.seeds):
        for folds in args.folds:
            for label, sigma in schemes:
                run = ProtocolRun(config(seed, folds, sigma, args.withheld))
                model = "cluster_cf" if sigma is None else "cluster_ppcf"
                for rule in args.rules:
                    if args.split_after_disguise and sigma is not None:
                        clipped, unclipped = split_after_disguise(run, model, rule)
                        rows.setdefault((label, folds, rule), []).append((clipped, unclipped, 1.0))
                        continue
                    s = run.score(model, {"clusters": 1, "neighbours": rule})
                    rows.setdefault((label, folds, rule), []).append(
                        (s.mae, s.mae_other_clip, s.coverage)
                    )
                    print(
                        f"seed {seed} {label:>14} {folds:>2}-fold {rule:>8}: MAE {s.mae:.4f} "
                        f"unclipped {s.mae_other_clip:.4f} coverage {s.coverage:.3f}",
                        file=sys.stderr,
                        flush=True,
                    )
    print(f"\n{'scheme':>14} {'folds':>5} {'rule':>8} {'MAE clipped':>16} {'unclipped':>16} cover")
    for (label, folds, rule), vals in rows.items():
        v = np.array(vals)
        sd = v.std(axis=0, ddof=1) if len(v) > 1 else np.zeros(3)
        print(
            f"{label:>14} {folds:>5} {rule:>8} {v[:, 0].mean():.4f} ± {sd[0]:.4f} "
            f"{v[:, 1].mean():.4f} ± {sd[1]:.4f} {v[:, 2].mean():.3f}"
        )
    print(f"\n{time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
