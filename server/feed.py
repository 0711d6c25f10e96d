"""The observation feed: every accepted request, as a transcript record, to whoever observes.

The server process publishes it on MQTT for the live adversary (`server.node`), and the
in-process launcher records it (`sim.run`). Records are handed over in seq order from
whichever thread stored them, under the aggregator's writer lock, so the feed is in transcript
order; phase changes are markers on it (seq 0, method "Phase"), never stored in the transcript.
An observer must never break the protocol: its exceptions are logged, not raised.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator

from privrec.server.store import Store
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb

logger = logging.getLogger(__name__)

Observer = Callable[[pb.TranscriptRecord], None]
BatchObserver = Callable[[list[pb.TranscriptRecord]], None]


class ObservationFeed:
    """The feed of one aggregator.

    Args:
        store: the store whose transcript a late observer is sent first.
        lock: the aggregator's writer lock (no record is stored while an observer joins).

    Attributes:
        observers: called with each record.
        batch_observers: called once per accepted request or batch with its records.
    """

    def __init__(self, store: Store, lock: threading.RLock) -> None:
        self.store, self.lock = store, lock
        self.observers: list[Observer] = []
        self.batch_observers: list[BatchObserver] = []

    def add_batch_observer(
        self, observer: BatchObserver, *, replay: bool = False, phase: str = ""
    ) -> None:
        """Add a batch observer. With `replay`, first hand it every stored record (one call)
        and the marker of `phase`, the current phase, with no record stored in between (a
        restarted server's feed)."""
        with self.lock:
            if replay:
                observer(list(self.stored_records()))
                observer([pb.TranscriptRecord(seq=0, method="Phase", request=phase.encode())])
            self.batch_observers.append(observer)

    def stored_records(self) -> Iterator[pb.TranscriptRecord]:
        """Every stored transcript row as the feed's record (a restarted server's resend)."""
        for row in self.store.transcript():
            yield pb.TranscriptRecord(
                seq=row.seq, arrival_unix_ns=row.arrival_ns, method=row.method, request=row.request
            )

    def notify_many(self, items: list[tuple[int, str, bytes]]) -> None:
        """Hand the records (seq, method, request bytes) of one accepted request or batch to
        the observers: each record to the per-record observers, the whole list once to the
        batch observers."""
        if not (self.observers or self.batch_observers) or not items:
            return
        now = time.time_ns()
        records = [
            pb.TranscriptRecord(seq=seq, arrival_unix_ns=now, method=method, request=raw)
            for seq, method, raw in items
        ]
        for observer in self.observers:
            for record in records:
                try:
                    observer(record)
                except Exception:  # an observer must never break the protocol
                    logger.exception("observer failed on record %d", record.seq)
        for batch_observer in self.batch_observers:
            try:
                batch_observer(records)
            except Exception:  # an observer must never break the protocol
                logger.exception("observer failed on records from %d", records[0].seq)


__all__ = ["BatchObserver", "ObservationFeed", "Observer"]
