"""Feeds: async iterators over the messages of one topic filter (`ControlPlane` builds them).

aiomqtt 2.x has a single `client.messages` iterator. The control plane's dispatcher task reads
it and routes each message to the `Feed` objects whose topic filter matches (their
`_Subscription`); each feed has its own `asyncio.Queue`, so several feeds (phases, observations,
statuses) can be consumed concurrently from different tasks. Feeds are held weakly: a feed
abandoned by `break` is dropped when it is garbage collected; `Feed.close()` (or ``async with``)
drops it deterministically.
"""

from __future__ import annotations

import asyncio
import dataclasses
import weakref
from collections.abc import Callable
from typing import Any, Generic, Self, TypeVar

import aiomqtt

from privrec.shared.control.topics import ControlPlaneError

T = TypeVar("T")


@dataclasses.dataclass(frozen=True, slots=True)
class End:
    """Queue sentinel: the feed ends, with `error` raised if not None."""

    error: ControlPlaneError | None = None


class Subscription:
    """One broker subscription (topic filter) and the local feeds that read it."""

    def __init__(self, topic_filter: str, *, cache_latest: bool) -> None:
        self.topic_filter = topic_filter
        self.cache_latest = cache_latest
        self.feeds: weakref.WeakSet[Feed[Any]] = weakref.WeakSet()
        self.latest: dict[str, aiomqtt.Message] = {}
        self.suback: asyncio.Task[None] | None = None
        self.error: ControlPlaneError | None = None

    def end(self, error: ControlPlaneError | None) -> None:
        """End every feed of this subscription (raising `error`, if given)."""
        for feed in list(self.feeds):
            feed.push(End(error))


class Feed(Generic[T]):
    """An async iterator over the messages of one topic filter, converted to `T`.

    Created by `ControlPlane.phases()`, `.observations()`, `.node_statuses()` and
    `.model_announcements()`; not meant to be built directly. The feed is registered (its queue
    receives messages) as soon as it is created; `await feed.subscribed()` additionally waits for
    the broker's SUBACK. Iteration ends when the feed is closed or the control plane exits, and
    raises `ControlPlaneError` when the connection is lost or the broker refused the
    subscription.
    """

    def __init__(
        self,
        sub: Subscription,
        convert: Callable[[aiomqtt.Message], T | None],
    ) -> None:
        self._sub = sub
        self._convert = convert
        self._queue: asyncio.Queue[aiomqtt.Message | End] = asyncio.Queue()
        self._end: End | None = None

    @property
    def topic_filter(self) -> str:
        """The MQTT topic filter this feed reads."""
        return self._sub.topic_filter

    async def subscribed(self) -> Self:
        """Wait until the broker acknowledged the subscription.

        Returns:
            self, so that ``feed = await cp.observations().subscribed()`` works.

        Raises:
            ControlPlaneError: the subscription failed or was refused, or the connection was
                lost.
        """
        if self._sub.suback is not None:
            await asyncio.shield(self._sub.suback)
        if self._sub.error is not None:
            raise self._sub.error
        return self

    def close(self) -> None:
        """Stop receiving; pending iteration ends with StopAsyncIteration. Idempotent."""
        self._sub.feeds.discard(self)
        self.push(End())

    def push(self, item: aiomqtt.Message | End) -> None:
        """Queue a message (or the end) for this feed (the dispatcher's side)."""
        if self._end is None:
            self._queue.put_nowait(item)

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> T:
        while True:
            if self._end is not None:
                if self._end.error is not None:
                    raise self._end.error
                raise StopAsyncIteration
            item = await self._queue.get()
            if isinstance(item, End):
                self._end = item
                self._sub.feeds.discard(self)
                continue
            value = self._convert(item)
            if value is not None:
                return value

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


__all__ = ["End", "Feed", "Subscription"]
