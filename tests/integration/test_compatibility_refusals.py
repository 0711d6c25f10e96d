"""The combinations issue 24 found starting anyway are one `privrec: error:` line before launch.

Before: `ppnbc` with the default RPT enrolled and collected, then died with a 57-line traceback;
`blip` + `ppcf` with a 54-line TypeError; an attack that does not apply was skipped with
`"attacks": []` in the report; a z-score model on rating releases ran (MAE 3.40); and
`[control].mqtt` was validated and never read. Each refusal here names both sides and what
would fit, exits 2, and no node is spawned.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from privrec.sim import cli, launcher

TINY = """
[data]
dataset = "synthetic"
synthetic_users = 60
synthetic_items = 40
"""

CASES = {
    "ppnbc-default-rpt": (
        '[model]\nname = "ppnbc"\n',
        "privrec: error: model.name: model 'ppnbc' reads binary likes, but mechanism 'rpt' "
        "releases disguised z-scores; with rpt use ppcf, sketch_knn, ppcf_plus, ppdwt, "
        "cluster_ppcf or bkm_ppcf, or run ppnbc on rrt",
    ),
    "blip-ppcf": (
        '[mechanism]\nname = "blip"\n',
        "privrec: error: model.name: model 'ppcf' reads disguised z-scores, but mechanism "
        "'blip' releases a sketch of the item set; with blip use sketch_knn, or run ppcf on rpt",
    ),
    "attack-not-applying": (
        '[mechanism]\nname = "rrt"\n[model]\nname = "ppnbc"\n',
        "privrec: error: adversary.attacks: attack 'rpt_spectral' applies to mechanism rpt, "
        "not 'rrt'; attacks on rrt: rrt_flip_inference (or attacks = [])",
    ),
    "zscore-model-on-ratings": (
        '[mechanism]\nname = "raw"\n[adversary]\nattacks = []\n',
        "privrec: error: model.name: model 'ppcf' reads disguised z-scores, but mechanism 'raw' "
        "releases ratings; with raw use pearson_knn, sketch_knn, cf_plus, cluster_cf, bkm_cf, "
        "corated_knn, pncf, dpsgd_pnbm, dpps_pnbm, dpsgd_mf, dpps_mf, biased_mf, sgd_mf, "
        "count_sketch_mf, feature_hashing_mf, dp_count_sketch_mf or two_tier_full_em, or run "
        "ppcf on rpt",
    ),
    "attack-without-its-knowledge": (
        '[mechanism]\nname = "blip"\n[model]\nname = "sketch_knn"\n'
        '[adversary]\nattacks = ["balu_popularity"]\n',
        "privrec: error: adversary.attacks: attack 'balu_popularity' needs the raw profiles of "
        'auxiliary users; set [adversary] auxiliary = "popularity"',
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_incompatible_run_is_one_line_before_launch(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def no_node(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"a node was spawned: {args!r}")

    monkeypatch.setattr(launcher, "spawn", no_node)  # LocalPlacement starts nodes through it
    body, expected = CASES[case]
    config = tmp_path / f"{case}.toml"
    config.write_text(TINY + body)
    out = tmp_path / "run"
    argv = ["sim", "--config", str(config), "--out", str(out), "--launcher", "processes"]
    assert cli.main([*argv, "--mqtt", "none"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert [line for line in err if line.startswith("privrec: error")] == [expected]
    assert not out.exists()  # refused before the run folder is made


def test_control_mqtt_is_the_run_broker_unless_the_command_names_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`[control] mqtt = "none"` runs without a broker (no broker log, `mqtt: none` in the
    report); `--mqtt embedded` on the command line overrides it."""
    config = tmp_path / "c.toml"
    config.write_text(TINY + '[adversary]\nattacks = []\n[control]\nmqtt = "none"\n')
    base = ["sim", "--config", str(config), "--launcher", "inprocess"]
    assert cli.main([*base, "--out", str(tmp_path / "a")]) == 0
    assert "mqtt=none" in capsys.readouterr().err
    report = json.loads((tmp_path / "a" / "report.json").read_text())
    assert report["run"]["mqtt"] == "none"
    assert not (tmp_path / "a" / "logs" / "broker.log").exists()
    assert cli.main([*base, "--out", str(tmp_path / "b"), "--mqtt", "embedded"]) == 0
    report = json.loads((tmp_path / "b" / "report.json").read_text())
    assert report["run"]["mqtt"] == "embedded"
    assert (tmp_path / "b" / "logs" / "broker.log").exists()
