"""`pip install .` puts one `privrec` package into site-packages (DESIGN: "One package")."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NODES = ("shared", "server", "client", "adversary", "sim")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # build from a copy, so that setuptools' build/ and egg-info never land in the checkout
    src = out / "src"
    shutil.copytree(
        ROOT,
        src,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "runs", "build", "*.egg-info", "__pycache__", ".*_cache"
        ),
    )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(out),
            str(src),
        ],
        check=True,
        capture_output=True,
        cwd=src,
    )
    (built,) = out.glob("privrec-*.whl")
    return built


def test_wheel_holds_one_top_level_package(wheel: Path) -> None:
    """Every file is under privrec/ (or the dist-info): no generic top-level package; the
    whole package is typed; the generated stubs ship."""
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"privrec"}
    assert "privrec/py.typed" in names
    for node in NODES:
        assert f"privrec/{node}/__init__.py" in names
    assert "privrec/shared/proto/privrec/v1/aggregator_pb2.pyi" in names


def test_installed_package_imports_and_nothing_generic_does(wheel: Path, tmp_path: Path) -> None:
    """In a clean environment: `import privrec` gives the version, and none of the node
    folders' names is importable at the top level."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--quiet",
            "--no-deps",
            str(wheel),
        ],
        check=True,
        capture_output=True,
    )
    probe = (
        "import importlib.util, privrec; print(privrec.__version__); "
        f"print([n for n in {NODES!r} if importlib.util.find_spec(n)])"
    )
    out = subprocess.run(
        [str(python), "-c", probe], cwd=tmp_path, check=True, capture_output=True, text=True
    ).stdout.split("\n")
    assert (
        out[0]
        == subprocess.run(
            [sys.executable, "-c", "import privrec; print(privrec.__version__)"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    assert out[1] == "[]"
