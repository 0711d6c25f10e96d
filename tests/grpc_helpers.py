"""Helpers shared by the tests that talk to a real grpc.aio aggregator."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

import grpc
import pytest

from server.aggregator import RunSpec
from shared.mechanisms import RandomizedPerturbation


def one_tier_spec(run_id: str, admin_token: str, n_items: int) -> RunSpec:
    """A small one-tier run: RPT releases, the PPCF model."""
    return RunSpec(run_id=run_id, mechanism=RandomizedPerturbation(1.0, 10), model="ppcf",
                   model_params={"k": 5}, n_items=n_items, dataset="test", rating_scale=(1, 5),
                   n_folds=2, fold_seed=0, max_release_bytes=4096, admin_token=admin_token,
                   token_key=b"k" * 32)


async def expect(code: grpc.StatusCode, needle: str, call: Awaitable[Any]) -> None:
    """`call` fails with status `code` and a message containing `needle`."""
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call
    assert info.value.code() == code, info.value.details()
    assert needle in (info.value.details() or ""), info.value.details()
