"""The generated stubs in shared/proto/ are exactly what protos/ generates."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_protos_regenerate_identically(tmp_path: Path) -> None:
    """Regenerating the stubs from protos/ changes nothing (Flower's check-protos)."""
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_protos.py"), str(tmp_path)],
        check=True,
        capture_output=True,
    )
    committed = {
        p.relative_to(ROOT / "shared" / "proto"): p.read_bytes()
        for p in (ROOT / "shared" / "proto").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    fresh = {p.relative_to(tmp_path): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert sorted(fresh) == sorted(committed)
    for name, data in fresh.items():
        assert committed[name] == data, f"shared/proto/{name} is stale: run make protos"
