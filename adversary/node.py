"""`privrec adversary`: a node that follows the server's observation feed and attacks it.

It subscribes before the run starts, appends every record to its own file (length-prefixed
`TranscriptRecord`s, `adversary/record.bin`), and when the "attack" phase marker arrives on the
feed, builds its `Observations` and writes each attack's output to `adversary/live/`. The public
run config comes from `GetRunConfig`, which anyone may call (`PublicRunConfig.from_proto`).

**Rejoining.** An adversary killed and started again keeps its record (`RecordFile`), asks the
server's transcript for what it missed, by sequence number (`catch_up`, `GetTranscript`: the
adversary may read it, as it may read the feed), and does not wait for a marker that passed
while it was down: the orchestrator's retained (signed) phase or the server's own phase says
"attack" too (`record_until_attack`).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import struct
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO, ParamSpec, Protocol, TypeVar

from privrec.adversary.observations import Observations
from privrec.adversary.replay import (
    AttackProgress,
    observations_from_records,
    run_attacks,
    save_output,
    side_knowledge,
)
from privrec.shared.data.dataset import RatingData
from privrec.shared.files import open_private_append, private_dir, read_json_object
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.run_config import PublicRunConfig

logger = logging.getLogger(__name__)
P = ParamSpec("P")
R = TypeVar("R")
RECORD_NAME = "record.bin"


class RecordFile:
    """The adversary's own append-only record of the observation feed: length-prefixed
    `TranscriptRecord`s, 0600.

    Opening an existing record keeps it (a restarted adversary goes on from what it had):
    `seqs` holds the records it holds, and a record cut short by a kill is cut off first, so
    that what is appended next is read back whole. With `run_id`, a record of another run
    (named in ``RECORD.run`` beside it) is started afresh instead.

    Args:
        path: the record file.
        run_id: the run this record belongs to.
    """

    def __init__(self, path: Path, run_id: str | None = None) -> None:
        self.path = path
        private_dir(path.parent)
        self.seqs: set[int] = set()
        if run_id is not None:
            marker = path.with_name(path.name + ".run")
            if not marker.exists() or marker.read_text() != run_id:
                path.unlink(missing_ok=True)
                marker.write_text(run_id)
        if path.exists():
            valid = 0
            with path.open("rb") as f:
                for rec, end in _framed(f):
                    self.seqs.add(rec.seq)
                    valid = end
            if valid < path.stat().st_size:
                logger.warning("%s: a record cut short at byte %d is dropped", path, valid)
                os.truncate(path, valid)
        self._f = open_private_append(path)  # every user's releases, as the server saw them

    def add(self, rec: pb.TranscriptRecord) -> bool:
        """Append `rec` unless its seq is held already; whether it was appended."""
        if rec.seq in self.seqs:
            return False
        self.seqs.add(rec.seq)
        self.append(rec.SerializeToString())
        return True

    def append(self, raw: bytes) -> None:
        """Append one length-prefixed record to the file (buffered; see `flush`)."""
        self._f.write(struct.pack("<I", len(raw)) + raw)

    def flush(self) -> None:
        """Push the buffered records to the file."""
        self._f.flush()

    def first_missing(self) -> int:
        """The smallest seq (from 1) not held: where a catch-up starts."""
        seq = 1
        while seq in self.seqs:
            seq += 1
        return seq

    def close(self) -> None:
        """Flush and close the file."""
        self._f.flush()
        self._f.close()

    @staticmethod
    def in_seq_order(path: Path) -> Iterator[pb.TranscriptRecord]:
        """The records in seq order: read one at a time when the file is in that order (a run
        without restarts: a million records are never held at once, ≈ 2 GB), else sorted in
        memory (a restarted adversary appended what it missed after what came later)."""
        seqs = (rec.seq for rec in RecordFile.read(path))
        if all(a < b for a, b in itertools.pairwise(seqs)):
            return RecordFile.read(path)
        return iter(sorted(RecordFile.read(path), key=lambda rec: rec.seq))

    @staticmethod
    def read(path: Path) -> Iterator[pb.TranscriptRecord]:
        """The records in file order (a record cut short at the end is left out)."""
        with path.open("rb") as f:
            for rec, _ in _framed(f):
                yield rec


def _framed(f: BinaryIO) -> Iterator[tuple[pb.TranscriptRecord, int]]:
    """Each whole record of an open record file, read one by one (the file is never held
    whole: 1.9 GB at a million users), with the offset where it ends."""
    pos = 0
    while len(head := f.read(4)) == 4:
        (n,) = struct.unpack("<I", head)
        raw = f.read(n)
        if len(raw) < n:
            logger.warning("record file ends with a truncated record at byte %d", pos)
            return
        pos += 4 + n
        yield pb.TranscriptRecord.FromString(raw), pos


async def follow_feed(
    feed: AsyncIterator[bytes], record: RecordFile, until_phase: str = "attack"
) -> int:
    """Append records of an open observation feed until the server's phase marker
    `until_phase`; returns the count. Each feed message is a `TranscriptBatch` (the records of
    one accepted request or batch); each record is appended on its own, so the record file is
    the same as with one message per record. Each seq is kept once (`RecordFile.add`): a
    restarted server publishes its transcript again. The record is flushed after each message
    (a killed adversary loses no more than the message it was writing)."""
    n = 0
    async for raw in feed:
        for rec in pb.TranscriptBatch.FromString(raw).records:
            if rec.method == "Phase":
                if rec.request.decode() == until_phase:
                    record.flush()
                    return n
                continue
            n += record.add(rec)
        record.flush()
    record.flush()
    return n


class TranscriptSource(Protocol):
    """What a catch-up reads (`client.transport.GrpcTransport.transcript_after`)."""

    async def transcript_after(self, seq: int) -> list[pb.TranscriptRecord]: ...


async def catch_up(source: TranscriptSource, record: RecordFile) -> int:
    """Fetch from the server's transcript every record from the first one the record lacks
    (`GetTranscript`, page by page) and append those it lacks; returns how many. A restarted
    adversary calls it once subscribed (what was stored while it was down) and again when the
    run reached the attack phase without the feed saying so."""
    n, after = 0, record.first_missing() - 1
    while True:
        page = await source.transcript_after(after)
        if not page:
            record.flush()
            return n
        n += sum(record.add(rec) for rec in page)
        after = page[-1].seq


async def record_until_attack(
    feed: AsyncIterator[bytes],
    record: RecordFile,
    source: TranscriptSource,
    attack_reached: Callable[[], Awaitable[object]],
) -> int:
    """Follow the feed into `record` until its "attack" marker, or until `attack_reached`
    returns (the phase a restarted adversary missed: the orchestrator's retained announcement,
    or the server's own phase), whichever comes first; then catch up on anything missing.
    Returns the records added."""
    following = asyncio.create_task(follow_feed(feed, record), name="privrec[adversary].feed")
    watching = asyncio.ensure_future(attack_reached())
    try:
        done, _ = await asyncio.wait({following, watching}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (following, watching):
            task.cancel()
        await asyncio.gather(following, watching, return_exceptions=True)
    n = following.result() if following in done and not following.cancelled() else 0
    if following not in done:
        logger.info("the run reached 'attack' while the feed had not said so: catching up")
    return n + await catch_up(source, record)


def attack_record(
    record_path: Path,
    run_config: PublicRunConfig,
    names: Sequence[str],
    out_dir: Path,
    progress: AttackProgress | None = None,
    auxiliary: RatingData | None = None,
    run_dir: Path | None = None,
) -> dict[str, Any]:
    """Attack the live record; outputs go to `out_dir` (one .npz per attack), with
    `summary.json` (what was observed, each output's header, each attack's seconds).
    `progress` is told which attack starts (`adversary.replay.run_attacks`). `auxiliary` is
    the declared sample of the population's raw profiles (`[adversary] auxiliary`), handed over
    by whoever started the adversary; the stated side knowledge and the sybils' record come from
    `run_dir` (`replay.side_knowledge`)."""
    knowledge, sybils = side_knowledge(run_dir) if run_dir is not None else (None, None)
    obs: Observations = observations_from_records(
        RecordFile.in_seq_order(record_path),
        run_config,
        auxiliary,
        knowledge=knowledge,
        sybils=sybils,
    )
    seconds: dict[str, float] = {}
    outputs = run_attacks(obs, names, progress, seconds)
    for name, out in outputs.items():
        save_output(out_dir / f"{name}.npz", out)
    summary = {
        "profiles": len(obs.profiles),
        "queries": len(obs.queries),
        "attacks": {n: o.to_dict() for n, o in outputs.items()},
        "seconds": seconds,
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def in_worker(fn: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    """`fn` run by `asyncio.to_thread` when awaited."""

    async def run(*args: P.args, **kwargs: P.kwargs) -> R:
        return await asyncio.to_thread(fn, *args, **kwargs)

    return run


attack_in_worker = in_worker(attack_record)
"""`attack_record` in a worker thread (same arguments), so that the node's event loop keeps
running while the attacks compute (minutes on ML-100K): it answers the broker's keep-alive (a
node whose loop is blocked for 1.5 × the keep-alive is dropped, with its last will published)
and its gRPC channel stays serviced. numpy releases the GIL in its kernels, and Python hands
the GIL back to the loop every few milliseconds of pure-Python work."""


PROGRESS_NAME = "progress.json"
"""Where the adversary node says which attack it is running (read by `privrec sim`)."""


def progress_file(path: Path) -> AttackProgress:
    """A progress callback that writes ``{"attack", "done", "total", "ts"}`` to `path`
    (atomically: a reader never sees half a file)."""

    def tell(attack: str, done: int, total: int) -> None:
        tmp = path.with_suffix(".tmp")
        path.parent.mkdir(parents=True, exist_ok=True)
        body = {"attack": attack, "done": done, "total": total, "ts": time.time()}
        tmp.write_text(json.dumps(body))
        tmp.replace(path)

    return tell


def read_progress(path: Path) -> dict[str, Any] | None:
    """What `progress_file` last wrote, or None (no file yet, or unreadable)."""
    return read_json_object(path)


__all__ = [
    "PROGRESS_NAME",
    "RecordFile",
    "attack_in_worker",
    "attack_record",
    "catch_up",
    "follow_feed",
    "progress_file",
    "read_progress",
    "record_until_attack",
]
