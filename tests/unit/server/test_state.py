"""The aggregator's shared state (`server.state`)."""

from __future__ import annotations

import json

from privrec.server.state import Counters


def test_counters_of_an_older_store_are_taken_up() -> None:
    """A store written before `Counters.queries` was dropped (issue 24: it was never read)
    still restores its counters; the unknown key is ignored, the others are kept."""
    saved = json.dumps({"rejected": 3, "duplicates": 2, "queries": 9, "train_seconds": 1.5})
    assert Counters.from_json(saved) == Counters(rejected=3, duplicates=2, train_seconds=1.5)
    assert Counters.from_json(None) == Counters()
