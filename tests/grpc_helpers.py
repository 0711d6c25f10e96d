"""Helpers shared by the tests that talk to a real grpc.aio aggregator."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable
from typing import Any

import grpc
import pytest

from privrec.server.aggregator import Aggregator
from privrec.server.servicer import start_server
from privrec.server.spec import RunSpec
from privrec.shared.mechanisms import RandomizedPerturbation


def one_tier_spec(run_id: str, admin_token: str, n_items: int) -> RunSpec:
    """A small one-tier run: RPT releases, the PPCF model."""
    return RunSpec(
        run_id=run_id,
        mechanism=RandomizedPerturbation(1.0, 10),
        model="ppcf",
        model_params={"k": 5},
        n_items=n_items,
        dataset="test",
        rating_scale=(1, 5),
        n_folds=2,
        fold_seed=0,
        max_release_bytes=4096,
        admin_token=admin_token,
        token_key=b"k" * 32,
    )


async def expect(code: grpc.StatusCode, needle: str, call: Awaitable[Any]) -> None:
    """`call` fails with status `code` and a message containing `needle`."""
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call
    assert info.value.code() == code, info.value.details()
    assert needle in (info.value.details() or ""), info.value.details()


@contextlib.asynccontextmanager
async def serving(core: Aggregator) -> AsyncIterator[int]:
    """Serve `core` over grpc.aio on a free port (yielded); stop it and close its store after."""
    server, port = await start_server(core, "127.0.0.1", 0)
    try:
        yield port
    finally:
        await server.stop(None)
        core.store.close()


@contextlib.asynccontextmanager
async def served_channel(core: Aggregator) -> AsyncIterator[grpc.aio.Channel]:
    """`serving(core)` and a client channel to it."""
    async with serving(core) as port:
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        try:
            yield channel
        finally:
            await channel.close()
