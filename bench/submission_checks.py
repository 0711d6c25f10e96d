"""Per-release cost of issue 27's checks on the submission path (the value bound of each
release, `Mechanism.check_values`, and one nonce per content in a batch,
`server.submission.check_batch_nonces`): the in-process ingest of `bench/ingest.py` with and
without them, alternated in one run, medians.

Usage: python bench/submission_checks.py [--users N] [--repeats R]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import ingest  # bench/ingest.py

from privrec.server import submission
from privrec.shared.mechanisms.base import Mechanism


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--users", type=int, default=20_000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    rels = ingest.releases(ingest.payload_pool(), {f"u{i:07d}": "" for i in range(args.users)})
    checks = (Mechanism.check_values, submission.check_batch_nonces)
    rates: dict[bool, list[float]] = {True: [], False: []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            for on in (True, False):
                if on:
                    Mechanism.check_values, submission.check_batch_nonces = checks
                else:
                    Mechanism.check_values = lambda *_: None  # type: ignore[method-assign]
                    submission.check_batch_nonces = lambda *_: None
                rates[on].append(ingest.inprocess_rate(rels, 512, Path(tmp) / f"{on}{r}"))
    Mechanism.check_values, submission.check_batch_nonces = checks
    on, off = statistics.median(rates[True]), statistics.median(rates[False])
    print(
        f"in-process releases/s: with the checks {on:,.0f}, without {off:,.0f}; "
        f"{(1 / on - 1 / off) * 1e6:+.1f} us per release ({len(rels)} releases, "
        f"medians of {args.repeats} alternated runs, load {os.getloadavg()[0]:.1f})"
    )


if __name__ == "__main__":
    main()
