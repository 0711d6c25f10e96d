"""The one mapping between privrec errors and gRPC status codes, both ways.

The server's adapter (`server/servicer.py`) turns a refusal into a status with `status_of`;
every gRPC client (the shards' transport, the operator's admin client, the adversary) turns a
status back into the same exception with `error_from_status`. Keeping the two directions in one
table is what makes an error raised by the core arrive as the same class on the other side.
"""

from __future__ import annotations

import grpc

from privrec.shared.errors import (
    AlreadyExistsError,
    AuthenticationError,
    PrivrecError,
    ProtocolError,
    ResourceExhaustedError,
    ValidationError,
)

STATUS_OF: dict[type[PrivrecError], grpc.StatusCode] = {
    ValidationError: grpc.StatusCode.INVALID_ARGUMENT,
    ProtocolError: grpc.StatusCode.FAILED_PRECONDITION,
    AuthenticationError: grpc.StatusCode.UNAUTHENTICATED,
    AlreadyExistsError: grpc.StatusCode.ALREADY_EXISTS,
    ResourceExhaustedError: grpc.StatusCode.RESOURCE_EXHAUSTED,
}
"""Each refusal class and its status (any other privrec error is INTERNAL)."""

RETRYABLE = frozenset(
    {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED}
)
"""Statuses a client retries (safe: every release carries an idempotency nonce, enrollment is
idempotent for its node, and a retried query is answered again and stored once). CANCELLED
reaches a client only when the server or the connection dropped the call (a restart)."""

BUSY_PREFIX = "busy: "
"""How a RESOURCE_EXHAUSTED for load begins (admission control); only those are retried, never
one for a request that is too large."""

INTERNAL_MESSAGE = "internal error"
"""What a client learns of an unexpected server failure (the details stay in the server's log,
under the reference the message gives)."""


def retryable(code: grpc.StatusCode, details: str) -> bool:
    """Whether a failed call may be sent again: a transient status, or "busy"."""
    if code in RETRYABLE:
        return True
    return code == grpc.StatusCode.RESOURCE_EXHAUSTED and details.startswith(BUSY_PREFIX)


def status_of(exc: PrivrecError) -> grpc.StatusCode:
    """The status a refusal is sent with."""
    for cls, code in STATUS_OF.items():
        if isinstance(exc, cls):
            return code
    return grpc.StatusCode.INTERNAL


def error_from_status(code: grpc.StatusCode, details: str) -> PrivrecError:
    """The privrec exception for a status (the inverse of `status_of`).

    INVALID_ARGUMENT details are "field: message" (`ValidationError`), so the field survives
    the trip; a status with no privrec class becomes a plain `PrivrecError` naming it.
    """
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        field, _, msg = details.partition(": ")
        return ValidationError(field, msg)
    for cls, status in STATUS_OF.items():
        if status == code:
            return cls(f"{details} [{code.name}]")
    return PrivrecError(f"{details} [{code.name}]")


def raise_from_rpc(exc: grpc.aio.AioRpcError) -> PrivrecError:
    """The privrec error of a failed call, by its status code; the caller raises it from `exc`."""
    return error_from_status(exc.code(), exc.details() or "")


__all__ = [
    "BUSY_PREFIX",
    "INTERNAL_MESSAGE",
    "RETRYABLE",
    "STATUS_OF",
    "error_from_status",
    "raise_from_rpc",
    "retryable",
    "status_of",
]
