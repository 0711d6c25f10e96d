"""`privrec adversary`: a node that follows the server's observation feed and attacks it.

It subscribes before the run starts, appends every record to its own file (length-prefixed
`TranscriptRecord`s, `adversary/record.bin`), and when the "attack" phase marker arrives on the
feed, builds its `Observations` and writes each attack's output to `adversary/live/`. The public
run config comes from `GetRunConfig`, which anyone may call (`PublicRunConfig.from_proto`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import struct
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

from privrec.adversary.observations import Observations
from privrec.adversary.replay import (
    AttackProgress,
    observations_from_records,
    run_attacks,
    save_output,
    side_knowledge,
)
from privrec.shared.data.dataset import RatingData
from privrec.shared.files import open_private_append, private_dir
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.run_config import PublicRunConfig

logger = logging.getLogger(__name__)
RECORD_NAME = "record.bin"


class RecordFile:
    """The adversary's own append-only record of the observation feed."""

    def __init__(self, path: Path) -> None:
        self.path = path
        private_dir(path.parent)
        self._f = open_private_append(path)  # every user's releases, as the server saw them

    def append(self, raw: bytes) -> None:
        self._f.write(struct.pack("<I", len(raw)) + raw)

    def close(self) -> None:
        self._f.flush()
        self._f.close()

    @staticmethod
    def read(path: Path) -> Iterator[pb.TranscriptRecord]:
        data = path.read_bytes()
        pos = 0
        while pos + 4 <= len(data):
            (n,) = struct.unpack_from("<I", data, pos)
            if pos + 4 + n > len(data):
                logger.warning("record file %s ends with a truncated record", path)
                return
            yield pb.TranscriptRecord.FromString(data[pos + 4 : pos + 4 + n])
            pos += 4 + n


async def follow_feed(
    feed: AsyncIterator[bytes], record: RecordFile, until_phase: str = "attack"
) -> int:
    """Append records of an open observation feed until the server's phase marker
    `until_phase`; returns the count. Each feed message is a `TranscriptBatch` (the records of
    one accepted request or batch); each record is appended on its own, so the record file is
    the same as with one message per record. Each seq is kept once: a restarted server
    publishes its transcript again."""
    n = 0
    seen: set[int] = set()
    async for raw in feed:
        for rec in pb.TranscriptBatch.FromString(raw).records:
            if rec.method == "Phase":
                if rec.request.decode() == until_phase:
                    record.close()
                    return n
                continue
            if rec.seq in seen:
                continue
            seen.add(rec.seq)
            record.append(rec.SerializeToString())
            n += 1
    record.close()
    return n


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
        RecordFile.read(record_path), run_config, auxiliary, knowledge=knowledge, sybils=sybils
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


async def attack_in_worker(
    record_path: Path,
    run_config: PublicRunConfig,
    names: Sequence[str],
    out_dir: Path,
    progress: AttackProgress | None = None,
    auxiliary: RatingData | None = None,
    run_dir: Path | None = None,
) -> dict[str, Any]:
    """`attack_record` in a worker thread, so that the node's event loop keeps running while
    the attacks compute (minutes on ML-100K): it answers the broker's keep-alive (a node whose
    loop is blocked for 1.5 × the keep-alive is dropped, with its last will published) and its
    gRPC channel stays serviced. numpy releases the GIL in its kernels, and Python hands the
    GIL back to the loop every few milliseconds of pure-Python work."""
    return await asyncio.to_thread(
        attack_record, record_path, run_config, names, out_dir, progress, auxiliary, run_dir
    )


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
    try:
        loaded = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return loaded if isinstance(loaded, dict) else None


__all__ = [
    "PROGRESS_NAME",
    "RecordFile",
    "attack_in_worker",
    "attack_record",
    "follow_feed",
    "progress_file",
    "read_progress",
]
