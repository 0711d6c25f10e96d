"""`make check`'s type check: mypy --strict over the whole `privrec` package.

The node folders install as `privrec.shared`, `privrec.server`, … (setup.py), which an editable
install provides through an import hook that static checkers cannot see. This script lays out
the package as it installs — `.typecheck/privrec/` with links to `privrec/*` and to each node
folder — and runs mypy on it with the configuration in pyproject.toml.

Usage: python scripts/typecheck.py [extra mypy arguments]
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NODES = ("shared", "server", "client", "adversary", "sim")
SHADOW = ROOT / ".typecheck"


def shadow_tree() -> Path:
    """`.typecheck/privrec`, the package as installed, made of links to the source tree."""
    if SHADOW.exists():
        shutil.rmtree(SHADOW)
    pkg = SHADOW / "privrec"
    pkg.mkdir(parents=True)
    for path in (ROOT / "privrec").iterdir():
        if path.name != "__pycache__":
            (pkg / path.name).symlink_to(path)
    for node in NODES:
        (pkg / node).symlink_to(ROOT / node, target_is_directory=True)
    return SHADOW


def main() -> int:
    shadow = shadow_tree()
    cmd = [
        sys.executable,
        "-m",
        "mypy",
        "--config-file",
        str(ROOT / "pyproject.toml"),
        "-p",
        "privrec",
        *sys.argv[1:],
    ]
    return subprocess.run(
        cmd, cwd=ROOT, env={"MYPYPATH": str(shadow), "PATH": ""}, check=False
    ).returncode


if __name__ == "__main__":
    raise SystemExit(main())
