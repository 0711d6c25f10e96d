"""The small exception set of privrec.

Every node raises these (or converts third-party errors to them at its edge); the gRPC adapter maps
them to status codes in one place (`server/servicer.py`), and the CLI prints them as one line with
exit status 2.
"""

from __future__ import annotations


class PrivrecError(Exception):
    """Base class of every error privrec raises on purpose."""


class ConfigError(PrivrecError, ValueError):
    """A configuration key or value is wrong; the message names the key and echoes the value."""


class DataError(PrivrecError, ValueError):
    """A data file is missing, malformed, or fails its checksum."""


class ValidationError(PrivrecError, ValueError):
    """A request field is invalid (maps to INVALID_ARGUMENT). `field` names the offending field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class ProtocolError(PrivrecError):
    """A request is well formed but not allowed now (maps to FAILED_PRECONDITION)."""

    def __init__(self, message: str, *, run_id: str = "", user_id: str = "") -> None:
        super().__init__(message)
        self.run_id = run_id
        self.user_id = user_id


class AuthenticationError(PrivrecError):
    """A request's node signature, admin token or enrollment receipt is wrong or missing
    (maps to UNAUTHENTICATED)."""


class AlreadyExistsError(PrivrecError):
    """A conflicting object already exists (maps to ALREADY_EXISTS)."""


class ResourceExhaustedError(PrivrecError):
    """A request is larger than the server accepts, or the server is busy ("busy: …",
    retried by clients) (maps to RESOURCE_EXHAUSTED)."""


class UnsupportedEventError(PrivrecError):
    """The accountant cannot compose a privacy event of the configured protocol."""


class NotFittedError(PrivrecError, RuntimeError):
    """A model or attack was used before `fit`."""


__all__ = [
    "AlreadyExistsError",
    "AuthenticationError",
    "ConfigError",
    "DataError",
    "NotFittedError",
    "PrivrecError",
    "ProtocolError",
    "ResourceExhaustedError",
    "UnsupportedEventError",
    "ValidationError",
]
