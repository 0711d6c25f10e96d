"""`release_free_memory` reaches glibc's malloc_trim where there is one."""

from __future__ import annotations

import platform

import pytest

from privrec.shared import memory


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")
def test_free_heap_memory_is_handed_back_on_glibc() -> None:
    garbage = [bytes(1000) for _ in range(100_000)]  # 100 MB of small blocks, then freed
    del garbage
    assert memory.release_free_memory() is True


def test_without_malloc_trim_it_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory, "_malloc_trim", lambda: None)
    assert memory.release_free_memory() is False
