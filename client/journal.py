"""A shard's journal of the answers it got, so that a restarted shard asks only for the rest.

Each answered query batch is appended before the shard goes on, one record per user: the
length of her id and of her serialized `PredictResponse` (two little-endian uint32), then both,
in `predictions/shard-I.answers` (0600: her predicted ratings are per-user data). A shard
killed in "serve" and started again reads it back and queries only the users without an
answer (docs/decisions/trust.md, "Nodes rejoin").
A record cut short by the kill is ignored (its batch is asked again: the same bytes, a retry the
server answers again and stores once). The journal stays after the predictions are written (a
shard restarted after it finished asks nothing again); `privrec sim` removes the journals of an
earlier run in the same folder when it starts.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Sequence
from pathlib import Path

from privrec.shared.files import open_private_append
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb

logger = logging.getLogger(__name__)
_HEADER = struct.Struct("<II")  # len(user id), len(answer)


class AnswerJournal:
    """The answers of one shard, on disk.

    Args:
        path: the journal file (created 0600 when the first answers come).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.answers: dict[str, pb.PredictResponse] = {}
        if path.exists():
            self._read()

    def _read(self) -> None:
        data = self.path.read_bytes()
        pos = 0
        while pos + _HEADER.size <= len(data):
            n_id, n_answer = _HEADER.unpack_from(data, pos)
            start = pos + _HEADER.size
            if start + n_id + n_answer > len(data):
                logger.warning(
                    "%s ends with a record cut short; its batch is asked again", self.path
                )
                break
            user_id = data[start : start + n_id].decode()
            answer = pb.PredictResponse.FromString(data[start + n_id : start + n_id + n_answer])
            self.answers[user_id] = answer
            pos = start + n_id + n_answer

    def add(self, user_ids: Sequence[str], answers: Sequence[pb.PredictResponse]) -> None:
        """Append one batch's answers (written through before this returns)."""
        with open_private_append(self.path) as f:
            for user_id, answer in zip(user_ids, answers, strict=True):
                uid, raw = user_id.encode(), answer.SerializeToString()
                f.write(_HEADER.pack(len(uid), len(raw)) + uid + raw)
                self.answers[user_id] = answer


__all__ = ["AnswerJournal"]
