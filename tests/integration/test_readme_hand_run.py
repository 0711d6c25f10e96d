"""The README's "A run by hand", followed verbatim: real processes (the broker included), the
operator's `privrec admin` commands in order, then `privrec report` writes the report.

The commands are read from the README itself; only the two ports are replaced by free ones
(tests never use fixed ports) and the working directory is a temporary folder holding a link to
the repository's `configs/`.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import free_port

pytestmark = [pytest.mark.slow, pytest.mark.broker, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
STEP_TIMEOUT_S = 300.0


def readme_section(title: str) -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else None]


def code_lines(section: str) -> list[str]:
    """Every line of the section's code blocks, comments included, blank lines dropped."""
    blocks = re.findall(r"```\n(.*?)```", section, flags=re.S)
    return [line.strip() for block in blocks for line in block.splitlines() if line.strip()]


def privrec(argv: list[str]) -> list[str]:
    assert argv[0] == "privrec", argv
    return [sys.executable, "-m", "privrec.sim.cli", *argv[1:]]


def wait_exit(proc: subprocess.Popen[bytes], name: str, log: Path) -> None:
    try:
        code = proc.wait(STEP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{name} still running after {STEP_TIMEOUT_S}s; log:\n{log.read_text()}")
    assert code == 0, f"{name} exited with {code}; log:\n{log.read_text()}"


def test_readme_hand_run_ends_in_a_report(tmp_path: Path) -> None:
    """Certificates and keys, then broker, server, adversary and two shards by hand (mutual TLS,
    signed requests); the admin phases; `privrec report`."""
    lines = code_lines(readme_section("A run by hand"))
    mqtt_port, grpc_port = free_port("127.0.0.1"), free_port("127.0.0.1")
    (tmp_path / "configs").symlink_to(ROOT / "configs")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("PRIVREC_ADMIN_TOKEN", None)

    def localise(line: str) -> str:
        line = line.replace("privrec broker", f"privrec broker --port {mqtt_port}")
        return line.replace("1883", str(mqtt_port)).replace("50051", str(grpc_port))

    nodes: dict[str, subprocess.Popen[bytes]] = {}
    logs: dict[str, Path] = {}
    variables: dict[str, str] = {}
    ran: list[str] = []
    try:
        for raw in lines:
            line = localise(raw)
            if line.startswith("#"):
                if "shards have exited" in line:
                    for name in [n for n in nodes if n.startswith("clients")]:
                        wait_exit(nodes[name], name, logs[name])
                elif "adversary has exited" in line:
                    wait_exit(nodes["adversary"], "adversary", logs["adversary"])
                continue
            if m := re.fullmatch(r'(\w+)="(.*)"', line):
                variables[m.group(1)] = m.group(2)
                continue
            for key, value in variables.items():
                line = line.replace(f"${key}", value)
            argv = shlex.split(line)
            command = argv[1]
            if command in ("broker", "server", "adversary", "clients"):
                name = command if command != "clients" else f"clients-{argv[-1]}"
                logs[name] = tmp_path / f"{name.replace('/', '-')}.log"
                with logs[name].open("wb") as out:
                    nodes[name] = subprocess.Popen(
                        privrec(argv), cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT, env=env
                    )
                if command == "broker":  # the next node connects at once
                    _wait_for(logs[name], "listening on mqtts://", nodes[name])
                if command == "server":
                    _wait_for(tmp_path / "runs/manual/server.ready", "", nodes[name])
            else:
                if command == "report":  # the README stops the server and the broker first
                    for name in ("server", "broker"):
                        nodes[name].send_signal(signal.SIGINT)
                        wait_exit(nodes[name], name, logs[name])
                res = subprocess.run(
                    privrec(argv),
                    cwd=tmp_path,
                    capture_output=True,
                    text=True,
                    env=env,
                    timeout=STEP_TIMEOUT_S,
                    check=False,
                )
                assert res.returncode == 0, f"{line}\n{res.stdout}\n{res.stderr}"
            ran.append(command)
    finally:
        for proc in nodes.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert ran == [
        "certs",
        "keys",
        "broker",
        "server",
        "adversary",
        "clients",
        "clients",
        *["admin"] * 6,
        "report",
    ]
    run = tmp_path / "runs" / "manual"
    report = json.loads((run / "report.json").read_text())
    assert report["run"]["launcher"] == "by hand"
    assert report["population"]["enrolled"] == report["population"]["profiles"] == 200
    assert report["population"]["queries"] == 200
    assert 0.3 < report["utility"]["ppcf_mae"] < 1.5
    assert {a["name"] for a in report["attacks"]} == {
        "rpt_spectral",
        "rpt_bayes",
        "rpt_fake_detection",
    }
    assert report["run"]["attack_outputs"] == "adversary/live"  # the live adversary's
    assert {"enroll", "collect", "serve", "report", "report.plots"} <= set(report["timings"])
    assert (run / "report.md").read_text().startswith("# privrec run manual")
    for plot in ("utility", "attacks"):
        assert (run / "plots" / f"{plot}.png").stat().st_size > 10_000


def _wait_for(path: Path, text: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text(errors="replace"):
            return
        assert proc.poll() is None, f"{proc.args} exited with {proc.returncode}"
        time.sleep(0.1)
    pytest.fail(f"{path} never showed {text!r}")
