"""`privrec adversary`: a node that follows the server's observation feed and attacks it.

It subscribes before the run starts, appends every record to its own file (length-prefixed
`TranscriptRecord`s, `adversary/record.bin`), and when the "attack" phase marker arrives on the
feed, builds its `Observations` and writes each attack's output to `adversary/live/`. The public
run config comes from `GetRunConfig`, which anyone may call (`PublicRunConfig.from_proto`).
"""

from __future__ import annotations

import json
import logging
import struct
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

from privrec.adversary.observations import Observations
from privrec.adversary.replay import (
    observations_from_records,
    run_attacks,
    save_output,
    side_knowledge,
)
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.run_config import PublicRunConfig

logger = logging.getLogger(__name__)
RECORD_NAME = "record.bin"


class RecordFile:
    """The adversary's own append-only record of the observation feed."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._f = path.open("ab")

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
    `until_phase`; returns the count."""
    n = 0
    async for raw in feed:
        rec = pb.TranscriptRecord.FromString(raw)
        if rec.method == "Phase":
            if rec.request.decode() == until_phase:
                break
            continue
        record.append(raw)
        n += 1
    record.close()
    return n


def attack_record(
    record_path: Path,
    run_config: PublicRunConfig,
    names: Sequence[str],
    out_dir: Path,
    run_dir: Path | None = None,
) -> dict[str, Any]:
    """Attack the live record; outputs go to `out_dir` (one .npz per attack). The stated side
    knowledge and the sybils' record come from `run_dir` (`replay.side_knowledge`)."""
    knowledge, sybils = side_knowledge(run_dir) if run_dir is not None else (None, None)
    obs: Observations = observations_from_records(
        RecordFile.read(record_path), run_config, knowledge=knowledge, sybils=sybils
    )
    outputs = run_attacks(obs, names)
    for name, out in outputs.items():
        save_output(out_dir / f"{name}.npz", out)
    summary = {
        "profiles": len(obs.profiles),
        "queries": len(obs.queries),
        "attacks": {n: o.to_dict() for n, o in outputs.items()},
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


__all__ = ["RecordFile", "attack_record", "follow_feed"]
