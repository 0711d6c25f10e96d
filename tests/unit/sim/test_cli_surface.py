"""What a researcher meets at the command line (issue 14): every option explains itself,
`--mqtt embedded` on a node is explained instead of crashing, the run banner comes only after
the configuration is valid, and `report`/`replay` on a directory without a configuration say
what to pass. Each refusal is one `privrec: error:` line (or argparse's usage + error) and
exit status 2."""

from __future__ import annotations

import argparse
import socket
from pathlib import Path

import pytest

from privrec.sim import cli


def _parsers(
    parser: argparse.ArgumentParser, path: str = "privrec"
) -> list[tuple[str, argparse.ArgumentParser]]:
    out = [(path, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out += _parsers(sub, f"{path} {name}")
    return out


def test_every_option_of_every_command_has_help() -> None:
    """Regression: #14 listed `server --run-dir/--run-id/--mqtt/--seed/--host/--port` and
    `sim --launcher` without help text."""
    missing = [
        f"{path} {'/'.join(a.option_strings) or a.dest}"
        for path, parser in _parsers(cli.build_parser())
        for a in parser._actions
        if not isinstance(a, argparse._SubParsersAction | argparse._HelpAction)
        and a.dest != "version"
        and not a.help
    ]
    assert missing == []


@pytest.mark.parametrize("command", ["server", "clients", "adversary"])
def test_a_node_explains_mqtt_embedded(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Regression: #14 `privrec server --mqtt embedded` crashed with an "Event loop is closed"
    traceback. A node starts no broker: the error says how to get one."""
    extra = {"server": [], "clients": ["--server", "h:1", "--shard", "0/1"], "adversary": []}
    extra["adversary"] = ["--server", "h:1"]
    with pytest.raises(SystemExit) as exit_:
        cli.main(
            [command, "--run-dir", "r", "--run-id", "x", "--mqtt", "embedded", *extra[command]]
        )
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "privrec broker" in err and "mqtt://127.0.0.1:1883" in err
    assert "Traceback" not in err


def test_the_run_banner_comes_after_validation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A config error stops `privrec sim` with one line, before the banner and the folder."""
    bad = tmp_path / "bad.toml"
    bad.write_text(
        '[data]\ndataset = "synthetic"\nsynthetic_users = 20\nsynthetic_items = 20\n'
        '[mechanism]\nname = "blip"\n[mechanism.params]\nepsilonn = 1.0\n'
    )
    out = tmp_path / "run"
    code = cli.main(["sim", "--config", str(bad), "--out", str(out), "--launcher", "inprocess"])
    assert code == 2
    err = capsys.readouterr().err
    assert "privrec sim" not in err  # no banner
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("privrec: error: mechanism.blip")
    assert "valid" in lines[0]
    assert not out.exists()


@pytest.mark.parametrize("command", ["sim", "adversary"])
def test_an_unknown_attack_stops_the_run_before_it_starts(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A misspelt attack is refused when `privrec sim` or `privrec adversary` starts, naming
    it and the known ones (it used to surface only when the run reached its attack phase)."""
    bad = tmp_path / "bad.toml"
    bad.write_text(
        '[data]\ndataset = "synthetic"\nsynthetic_users = 20\nsynthetic_items = 20\n'
        '[adversary]\nattacks = ["rpt_spectral", "rpt_spectrall"]\n'
    )
    out = tmp_path / "run"
    server = ["--server", "127.0.0.1:1", "--mqtt", "mqtt://127.0.0.1:1", "--insecure"]
    args = {
        "sim": ["--out", str(out), "--launcher", "inprocess"],
        "adversary": ["--run-dir", str(out), "--run-id", "x", *server],
    }[command]
    assert cli.main([command, "--config", str(bad), *args]) == 2
    err = capsys.readouterr().err
    line = next(x for x in err.splitlines() if x.startswith("privrec: error:"))
    assert line.startswith("privrec: error: adversary.attacks: unknown attack 'rpt_spectrall'")
    assert "'rpt_spectral'" in line.split("known:")[1]
    assert not out.exists()


@pytest.mark.parametrize("command", ["report", "replay"])
def test_report_and_replay_name_the_missing_configuration(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression: #14 `privrec replay runs/manual` failed with a bare "config file not found":
    now the message says to pass --config (and that a server started there writes one)."""
    assert cli.main([command, str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"privrec: error: config file not found: {tmp_path / 'config.toml'}")
    assert "--config" in err and "\n" not in err
    assert cli.main([command, str(tmp_path / "nowhere")]) == 2
    assert "is not a directory" in capsys.readouterr().err


def test_report_without_a_store_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A directory with a configuration but no server store: one line naming the store."""
    (tmp_path / "config.toml").write_text("[run]\nseed = 1\n")
    assert cli.main(["report", str(tmp_path)]) == 2
    assert "has no server store (server.sqlite)" in capsys.readouterr().err


def test_broker_on_a_taken_port_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """`privrec broker` where something already listens: one line naming the port."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert cli.main(["broker", "--port", str(port)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"privrec: error: --port: cannot listen on 127.0.0.1:{port}")
