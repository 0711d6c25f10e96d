"""`privrec sweep` end to end (issue 26): results, resumption, equality with `privrec sim`, bad
input, and the kill-and-resume with real signals.

One small study (a synthetic population of 60 users, two RPT attacks) is run once per module
and shared by the tests that only read it or try to change it.
"""

from __future__ import annotations

import csv
import hashlib
import json
import logging
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from privrec.sim import cli
from privrec.sim.study.drawing import in_turn, in_workers
from privrec.sim.study.metrics import Headline
from privrec.sim.study.plots import Recipe, against_axis
from privrec.sim.study.pool import THREAD_VARS, LocalPool, threads_per_worker
from privrec.sim.study.spec import Axis
from privrec.sim.study.worker import THREADS_LINE

TINY = """
[run]
name = "tiny"
[data]
dataset = "synthetic"
synthetic_users = 60
synthetic_items = 80
[model]
k = 10
[adversary]
attacks = ["rpt_spectral", "rpt_fake_detection"]
"""
GRID = "mechanism.params.sigma_max=0.5,2"
COMPARED = ("utility", "attacks", "privacy", "population")
STOP_LATENCY_S = 5.0
"""A run may complete as the stop arrives: one in its last synchronous step (the report, which
no cancellation interrupts) finishes it; 2.14 s after the signal was seen once at load 5 on 2
cores. A worker left running (not watching the sweep) is caught by the 20 s liveness check."""


@pytest.fixture(scope="module")
def tiny_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("config") / "tiny.toml"
    path.write_text(TINY)
    return path


def sweep_argv(config: Path, out: Path, *extra: str) -> list[str]:
    return ["sweep", "--config", str(config), "--grid", GRID, "--out", str(out), *extra]


@pytest.fixture(scope="module")
def study(tiny_config: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """2 σ_max values × 2 seeds on 2 local workers, inprocess."""
    out = tmp_path_factory.mktemp("study") / "s"
    assert cli.main(sweep_argv(tiny_config, out, "--seeds", "2", "--jobs", "2")) == 0
    return out


def snapshot(root: Path) -> dict[str, tuple[str, int]]:
    """Every file under `root`: its content's hash and its modification time."""
    return {
        str(p.relative_to(root)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def rows(root: Path) -> list[dict[str, str]]:
    with (root / "summary.csv").open() as f:
        return list(csv.DictReader(f))


def comparable(run_dir: Path) -> dict:
    report = json.loads((run_dir / "report.json").read_text())
    return {k: report[k] for k in COMPARED}


def test_sweep_writes_the_results_once_per_run(study: Path) -> None:
    """summary.csv has one row per run (4, each run directory once) with the axis and every
    report scalar; study.json has per-point intervals and the paired comparison of the two
    σ_max values; study.md and the figures are there."""
    table = rows(study)
    assert len(table) == 4 and len({r["run_dir"] for r in table}) == 4
    assert sorted((r["mechanism.params.sigma_max"], r["seed"]) for r in table) == [
        ("0.5", "0"), ("0.5", "1"), ("2", "0"), ("2", "1")
    ]  # fmt: skip
    assert {"utility.ppcf_mae", "attacks.rpt_spectral.rmse_z", "privacy.mechanism"} <= set(table[0])
    for r in table:
        report = json.loads((study / r["run_dir"] / "report.json").read_text())
        assert float(r["utility.ppcf_mae"]) == report["utility"]["ppcf_mae"]
    doc = json.loads((study / "study.json").read_text())
    (p0, _) = doc["points"]
    mae = p0["metrics"]["utility.ppcf_mae"]
    assert mae["n"] == 2 and mae["ci95"][0] < mae["mean"] < mae["ci95"][1]
    pairs = [c for c in doc["comparisons"] if c["metric"] == "utility.ppcf_mae"]
    assert len(pairs) == 1 and pairs[0]["axis"] == "mechanism.params.sigma_max"
    assert pairs[0]["n"] == 2 and pairs[0]["t_p"] is not None
    assert (study / "study.md").read_text().startswith("# privrec study")
    names = {p.name for p in (study / "plots").iterdir()}
    assert {"utility_vs_sigma_max.png", "attacks_vs_sigma_max.png", "tradeoff.png"} <= names


def test_running_it_again_runs_no_run(
    study: Path, tiny_config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same command again: every run is skipped and nothing in the study changes (the
    results stand; `--report` redraws them)."""
    before = snapshot(study)
    assert cli.main(sweep_argv(tiny_config, study, "--seeds", "2", "--jobs", "2")) == 0
    assert "(0 ran now, 4 finished before, 0 failed)" in capsys.readouterr().err
    after = snapshot(study)
    assert {k: v for k, v in after.items() if k != ".sweep.lock"} == {
        k: v for k, v in before.items() if k != ".sweep.lock"
    }


def test_report_rebuilds_the_results_from_the_runs(study: Path) -> None:
    """--report writes the same summary.csv, study.json and figures from the run directories
    alone (the sweep's figures were saved by its workers, --report's here: the same bytes)."""
    names = ["summary.csv", "study.json", *(f"plots/{p.name}" for p in (study / "plots").iterdir())]
    before = {n: (study / n).read_bytes() for n in names}
    for n in before:
        (study / n).unlink()
    assert cli.main(["sweep", "--report", str(study)]) == 0
    assert {n: (study / n).read_bytes() for n in before} == before


def _recipes() -> dict[str, Recipe]:
    """Two study figures to draw, of 1 and 6 panels, from made-up statistics."""
    axis = Axis("mechanism.params.sigma_max", (0.5, 1.0, 2.0))
    points = {i: {axis.key: v} for i, v in enumerate(axis.values)}
    recipes = {}
    for name, n in (("small", 1), ("large", 6)):
        heads = [
            Headline(f"utility.ppcf_m{j}", f"m{j}", "lower is better", (), "utility", "ppcf")
            for j in range(n)
        ]
        stats = {
            i: {
                h.column: {"mean": i + j, "ci95": [i + j - 0.5, i + j + 1.0]}
                for j, h in enumerate(heads)
            }
            for i in points
        }
        recipes[name] = Recipe(against_axis, (heads, axis, points, stats, f"{name} figure"), n)
    return recipes


def worker_threads(log_dir: Path) -> list[str]:
    """What each worker of `log_dir` said its runs' threads are (`sim.study.worker`)."""
    return [
        line.split(": ", 1)[1]
        for log in sorted(log_dir.glob("worker-*.log"))
        for line in log.read_text().splitlines()
        if line.startswith(THREADS_LINE)
    ]


@pytest.mark.parametrize("fork", [True, False], ids=["forked", "started"])
def test_figures_saved_by_the_workers_are_those_saved_here(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, fork: bool
) -> None:
    """`drawing.in_workers` on two real sweep workers, forked from here or started, writes
    the PNG bytes `in_turn` writes, each figure drawn by a worker (a failed job would be saved
    here, with a warning); each worker runs numba and BLAS on one thread."""
    figures = _recipes()
    here, there = tmp_path / "here", tmp_path / "workers"
    here.mkdir()
    there.mkdir()
    pool = LocalPool(2, 1, tmp_path / "logs", fork=fork)
    try:
        with caplog.at_level(logging.WARNING):
            in_workers(pool)(figures, there)()
    finally:
        pool.close()
    in_turn(figures, here)()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    for name in figures:
        png = (here / f"{name}.png").read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and (there / f"{name}.png").read_bytes() == png
    assert worker_threads(tmp_path / "logs") == ["numba 1, BLAS [1]"] * 2


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--grid", "model.kk=1,2"], "model.kk: unknown key"),
        (["--grid", "model.k=a,b"], "model.k: expected int, got 'a'"),
        (["--grid", "model.k="], "--grid model.k: the axis has no values"),
        (["--seeds", "0"], "--seeds: must be a count >= 1"),
        (["--seeds", "2", "--jobs", "0"], "--jobs must be >= 1, got 0"),
        (["--seeds", "3"], "holds a different study (seeds [0, 1] → [0, 1, 2])"),
        (["--seeds", "2", "--set", "model.k=11"], "holds a different study (base configuration"),
    ],
)
def test_bad_input_is_one_line_and_changes_nothing(
    study: Path,
    tiny_config: Path,
    extra: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Each refusal: one `privrec: error:` line naming the problem, status 2, and the
    existing study directory exactly as it was."""
    before = snapshot(study)
    assert cli.main(sweep_argv(tiny_config, study, *extra)) == 2
    err = capsys.readouterr().err
    assert err.startswith("privrec: error: ") and err.count("\n") == 1, err
    assert message in err
    assert snapshot(study) == before


@pytest.mark.parametrize(
    ("grid", "point", "message"),
    [
        ("mechanism.params.beta_max=10,-5", "sigma_max=0.5, beta_max=-5", "beta_max"),
        ("model.name=ppcf,ppnbc", "sigma_max=0.5, name=ppnbc", "reads binary likes"),
    ],
)
def test_a_point_the_run_would_refuse_is_refused_before_anything_starts(
    tiny_config: Path,
    tmp_path: Path,
    grid: str,
    point: str,
    message: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A mechanism parameter only the mechanism checks (β_max ≥ 0), or a model that cannot
    read the mechanism's releases (the compatibility check every run makes before launch),
    refuses the whole study up front, naming the point, and makes no directory."""
    out = tmp_path / "s"
    assert cli.main(sweep_argv(tiny_config, out, "--grid", grid)) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"privrec: error: point {point}: ")
    assert message in err and err.count("\n") == 1
    assert not out.exists()


def test_an_out_that_is_no_study_is_refused(
    tiny_config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    assert cli.main(sweep_argv(tiny_config, tmp_path, "--seeds", "1")) == 2
    assert "is not a study" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


@pytest.mark.parametrize(
    "launcher", ["inprocess", pytest.param("processes", marks=pytest.mark.slow)]
)
def test_a_studys_runs_equal_privrec_sim_bit_for_bit(
    tiny_config: Path, tmp_path: Path, launcher: str
) -> None:
    """Two points of a sweep against `privrec sim` with the same config and seed, on the same
    launcher: utility, attacks, privacy and counts identical."""
    out = tmp_path / "s"
    argv = sweep_argv(tiny_config, out, "--seeds", "1", "--jobs", "2", "--launcher", launcher)
    assert cli.main(argv) == 0
    by_value = {r["mechanism.params.sigma_max"]: out / r["run_dir"] for r in rows(out)}
    for value, run_dir in by_value.items():
        single = tmp_path / f"sim-{value}"
        sim = ["sim", "--config", str(tiny_config), "--out", str(single), "--launcher", launcher]
        sim += ["--set", f"mechanism.params.sigma_max={value}", "--seed", "0"]
        sim += ["--mqtt", "none" if launcher == "inprocess" else "embedded"]
        assert cli.main(sim) == 0
        assert comparable(run_dir) == comparable(single)
        assert (run_dir / "config.toml").read_text() == (single / "config.toml").read_text()


# ------------------------------------------------------------------ kill and resume
def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            tree.setdefault(int(fields[1]), []).append(int(entry.name))
    return tree


def descendants(pid: int) -> set[int]:
    """Every process under `pid` now (from /proc)."""
    tree, out, todo = _children(), set(), [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            out.add(child)
            todo.append(child)
    return out


def alive(pids: set[int]) -> set[int]:
    out = set()
    for pid in pids:
        try:
            state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            out.add(pid)
    return out


@pytest.fixture
def sweep_process() -> Iterator[list[subprocess.Popen[bytes]]]:
    """The sweeps a test starts, killed (and reaped) if the test fails half-way."""
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize(
    ("sig", "launcher"),
    [(signal.SIGTERM, "inprocess"), (signal.SIGKILL, "processes")],
)
def test_killed_mid_way_leaves_nothing_running_and_resumes_each_run_once(
    tiny_config: Path,
    tmp_path: Path,
    sig: signal.Signals,
    launcher: str,
    sweep_process: list[subprocess.Popen[bytes]],
) -> None:
    """A sweep of 6 runs on 2 workers gets a real SIGTERM or SIGKILL once a run has finished
    and two are under way (under `processes`, with their node processes up): within 20 s no
    process it started is left and no run finished after the signal (a worker left running,
    as without watching the sweep, finishes its run: tested); the same command then finishes the
    study, leaving the runs
    finished before the signal untouched, redoing the interrupted ones from nothing, and
    counting every run exactly once."""
    out = tmp_path / "s"
    argv = [sys.executable, "-m", "privrec.sim.cli"]
    argv += sweep_argv(tiny_config, out, "--grid", "mechanism.params.beta_max=10,25,40")
    argv += ["--seeds", "1", "--jobs", "2", "--launcher", launcher]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    sweep_process.append(proc)
    deadline = time.monotonic() + 300
    while True:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert time.monotonic() < deadline, "no run finished in 300 s"
        done = list(out.glob("runs/*/done.json"))
        under = descendants(proc.pid)
        workers = set(_children().get(proc.pid, []))  # forked or started, the sweep's children
        nodes = [p for p in under - workers if "privrec.sim.cli" in _cmdline(p)]
        running = [d for d in out.glob("runs/*") if not (d / "done.json").exists()]
        envs = [e for e in map(_environ, nodes) if e]  # an exiting node's reads empty
        if done and running and len(workers) == 2 and (envs or launcher == "inprocess"):
            break
        time.sleep(0.2)
    finished_before = {p.parent.name: p.read_bytes() for p in done}
    for environ in envs:  # a run's node: BLAS on one thread, numba on the worker's share
        assert {v: environ.get(v) for v in THREAD_VARS} == dict.fromkeys(THREAD_VARS, "1") | {
            "NUMBA_NUM_THREADS": str(threads_per_worker(2))
        }
    signalled = time.time()
    proc.send_signal(sig)
    proc.wait(60)
    if sig == signal.SIGTERM:
        assert proc.returncode == 128 + signal.SIGTERM
    gone_by = time.monotonic() + 20  # a worker stops its run's nodes (SIGTERM, then SIGKILL)
    while alive(under) and time.monotonic() < gone_by:
        time.sleep(0.2)
    assert not alive(under), [_cmdline(p) for p in alive(under)]
    # and nothing went on working after the signal: a run may complete as the stop arrives
    # (its done.json is whole and it counts once), none later (an orphan finishes in seconds)
    after = {p.parent.name: p.read_bytes() for p in out.glob("runs/*/done.json")}
    late = {
        name: json.loads(record)["finished"] - signalled
        for name, record in after.items()
        if name not in finished_before
    }
    assert all(seconds < STOP_LATENCY_S for seconds in late.values()), late
    finished_before = after

    resumed = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    assert resumed.returncode == 0, resumed.stderr
    table = rows(out)
    assert len(table) == 6 and len({r["run_dir"] for r in table}) == 6
    runs = sorted(out.glob("runs/*"))
    assert len(runs) == 6 and all((d / "done.json").exists() for d in runs)
    for name, record in finished_before.items():  # not run again
        assert (out / "runs" / name / "done.json").read_bytes() == record
    skipped = f"{6 - len(finished_before)} ran now, {len(finished_before)} finished before"
    assert skipped in resumed.stderr
    # numba: the worker's share of the cores; BLAS: one thread (the resumed sweep's workers)
    assert set(worker_threads(out / "logs")) == {f"numba {threads_per_worker(2)}, BLAS [1]"}


def _environ(pid: int) -> dict[str, str]:
    """The environment of process `pid` (empty once it is exiting or gone)."""
    try:
        raw = (Path("/proc") / str(pid) / "environ").read_text()
    except OSError:
        return {}
    return dict(kv.split("=", 1) for kv in raw.split("\0") if "=" in kv)


def _cmdline(pid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


# ------------------------------------------------------------------ on a Ray cluster
@pytest.fixture
def ray_head() -> Iterator[str]:
    """A Ray cluster on this machine (`ray start --head` as `ray.cluster_utils.Cluster`
    makes it, 2 CPUs); yields its address."""
    pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 2,
            "object_store_memory": 80 * 2**20,
            "include_dashboard": False,
        },
    )
    try:
        yield str(cluster.address)
    finally:
        cluster.shutdown()


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_sweep_on_ray_gives_the_local_numbers(
    study: Path, tiny_config: Path, tmp_path: Path, ray_head: str
) -> None:
    """--ray-address: each run a Ray task on the cluster (recorded in done.json), the run
    directories on the (here local) shared filesystem, the same run names and the same
    numbers as the local workers' runs of the same configs and seeds."""
    out = tmp_path / "s"
    argv = sweep_argv(tiny_config, out, "--seeds", "1", "--ray-address", ray_head)
    assert cli.main(argv) == 0
    table = rows(out)
    assert len(table) == 2
    for r in table:
        record = json.loads((out / r["run_dir"] / "done.json").read_text())
        assert record["where"] == "ray"
        assert comparable(out / r["run_dir"]) == comparable(study / r["run_dir"])
