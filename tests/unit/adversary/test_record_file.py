"""The adversary's record file (`adversary.node.RecordFile`): read one record at a time, and a
record cut short at the end (an adversary killed mid-write) dropped on reopening."""

from __future__ import annotations

from pathlib import Path

import pytest

from privrec.adversary.node import RecordFile
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb


def records(n: int) -> list[pb.TranscriptRecord]:
    return [
        pb.TranscriptRecord(seq=i + 1, method="X", request=bytes([i]) * (i * 37)) for i in range(n)
    ]


@pytest.mark.parametrize("cut", [1, 3, 4, 10])
def test_a_record_cut_short_is_dropped_and_the_file_goes_on(tmp_path: Path, cut: int) -> None:
    path = tmp_path / "record.bin"
    f = RecordFile(path)
    for rec in records(5):
        f.add(rec)
    f.close()
    whole = path.stat().st_size
    last = records(6)[5].SerializeToString()
    with path.open("ab") as out:  # the sixth record's length and part of it
        out.write((len(last)).to_bytes(4, "little") + last)
    with path.open("r+b") as out:
        out.truncate(whole + cut)
    assert [r.seq for r in RecordFile.read(path)] == [1, 2, 3, 4, 5]
    again = RecordFile(path)  # reopening truncates to the last whole record
    assert path.stat().st_size == whole
    assert again.seqs == {1, 2, 3, 4, 5} and again.first_missing() == 6
    assert again.add(records(6)[5]) and not again.add(records(6)[0])
    again.close()
    assert list(RecordFile.read(path)) == records(6)


def test_in_seq_order_streams_an_ordered_file_and_sorts_another(tmp_path: Path) -> None:
    """A restarted adversary appends what it missed after what came later: read in seq order
    either way (streamed when the file already is, a generator over the file)."""
    recs = records(6)
    ordered = RecordFile(tmp_path / "ordered.bin")
    for rec in recs:
        ordered.add(rec)
    ordered.close()
    stream = RecordFile.in_seq_order(tmp_path / "ordered.bin")
    assert not isinstance(stream, list) and list(stream) == recs
    caught_up = RecordFile(tmp_path / "caught_up.bin")
    for i in (0, 1, 4, 5, 2, 3):
        caught_up.add(recs[i])
    caught_up.close()
    assert [r.seq for r in RecordFile.read(tmp_path / "caught_up.bin")] == [1, 2, 5, 6, 3, 4]
    assert list(RecordFile.in_seq_order(tmp_path / "caught_up.bin")) == recs
