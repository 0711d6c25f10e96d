"""What the aggregator feeds a model's `fit`, by what the model consumes (`ModelInput`).

The stored profile releases come in as payloads in the canonical (user-id) order; each
`ModelInput` has one way of turning them into the training matrix. A two-tier model is fed by
its own protocol piece (`server.two_tier`), which uses `stack_sparse` and `estimates` too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import overload

import numpy as np
import scipy.sparse as sp

from privrec.shared.capabilities import ModelInput
from privrec.shared.mechanisms.base import Mechanism, Payload, SparsePayload
from privrec.shared.serde import release_payload
from privrec.shared.types import FloatArray

ESTIMATE_BLOCK = 4096
"""Releases per block in `estimate_sum` and `stack_sparse` (memory O(block x n_items),
whatever N)."""


class StoredPayloads(Sequence[Payload]):
    """The payloads of stored `Release` bytes, decoded on access (a slice decodes just its
    rows): `estimate_sum` then holds one block of decoded payloads at a time, not a million
    (a decoded OUE payload is ≈1.2 kB of Python objects; the stored bytes ≈0.2 kB)."""

    def __init__(self, raws: Sequence[bytes]) -> None:
        self._raws = raws

    def __len__(self) -> int:
        return len(self._raws)

    @overload
    def __getitem__(self, index: int) -> Payload: ...
    @overload
    def __getitem__(self, index: slice) -> list[Payload]: ...
    def __getitem__(self, index: int | slice) -> Payload | list[Payload]:
        if isinstance(index, slice):
            return [release_payload(raw) for raw in self._raws[index]]
        return release_payload(self._raws[index])


def stack_sparse(rows: Sequence[Payload], n_items: int) -> sp.csr_matrix:
    """Sparse payloads as one CSR matrix (filled cells stored, even a value of exactly 0).

    Read `ESTIMATE_BLOCK` rows at a time (stored payloads are decoded block by block), each
    block's cells appended as int32 items (when m fits) and float64 values: never every
    decoded payload at once (≈ 3 kB of arrays and objects per RPT release, 0.3 GB at 100,000
    users)."""
    index = np.int32 if n_items <= np.iinfo(np.int32).max else np.int64
    indptr = np.zeros(len(rows) + 1, dtype=np.int64)
    items: list[np.ndarray] = [np.zeros(0, dtype=index)]
    values: list[np.ndarray] = [np.zeros(0)]
    for start in range(0, len(rows), ESTIMATE_BLOCK):
        block = rows[start : start + ESTIMATE_BLOCK]
        sparse = [r for r in block if isinstance(r, SparsePayload)]
        if len(sparse) != len(block):
            raise TypeError("stack_sparse needs sparse payloads")
        indptr[start + 1 : start + 1 + len(sparse)] = [r.indices.size for r in sparse]
        items.append(np.concatenate([r.indices for r in sparse]).astype(index))
        values.append(np.concatenate([r.values for r in sparse]).astype(np.float64, copy=False))
        del block, sparse
    np.cumsum(indptr, out=indptr)
    return sp.csr_matrix(
        (np.concatenate(values), np.concatenate(items), indptr), shape=(len(rows), n_items)
    )


def estimates(rows: Sequence[Payload], mechanism: Mechanism, n_items: int) -> FloatArray:
    """`Mechanism.estimate` of each release, one dense row each, shape (len(rows), n_items)."""
    return mechanism.estimate_many(rows, n_items)


@dataclasses.dataclass(frozen=True)
class EstimateSum:
    """Σ_u `Mechanism.estimate`(release_u) over `n` releases (`ModelInput.ESTIMATE_SUM`).

    Attributes:
        total: float array of shape (n_items,).
        n: number of releases summed.
    """

    total: FloatArray
    n: int


def estimate_sum(rows: Sequence[Payload], mechanism: Mechanism, n_items: int) -> EstimateSum:
    """The column sums of `estimates(rows, ...)`, block by block (`ESTIMATE_BLOCK` rows), so
    that memory stays O(block x n_items) for any number of releases. Equal to
    ``estimates(rows, ...).sum(axis=0)`` up to float summation order (same blocks, same
    order: deterministic)."""
    total = np.zeros(n_items)
    for start in range(0, len(rows), ESTIMATE_BLOCK):
        total += estimates(rows[start : start + ESTIMATE_BLOCK], mechanism, n_items).sum(axis=0)
    return EstimateSum(total, len(rows))


TRAINING_INPUTS: dict[ModelInput, Callable[[Sequence[Payload], Mechanism, int], object]] = {
    ModelInput.RELEASES: lambda rows, _mechanism, n_items: stack_sparse(rows, n_items),
    ModelInput.ESTIMATES: estimates,
    ModelInput.ESTIMATE_SUM: estimate_sum,
}
"""How the releases become a one-stage model's training matrix, per `ModelInput`."""


__all__ = [
    "TRAINING_INPUTS",
    "EstimateSum",
    "StoredPayloads",
    "estimate_sum",
    "estimates",
    "stack_sparse",
]
