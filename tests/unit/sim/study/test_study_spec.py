"""A study's axes, seeds and runs (issue 26): the CLI's and the [sweep] table's forms give the
same study, and every bad input is refused with the key named."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from privrec.shared.config import ExperimentConfig
from privrec.shared.errors import ConfigError
from privrec.sim.study.spec import StudySpec, parse_axis, parse_seeds, run_name

BASE = {"data": {"dataset": "synthetic"}, "run": {"name": "s", "seed": 10}}


def test_grid_is_a_product_with_the_last_axis_fastest() -> None:
    """Two grid axes: 2 × 3 points, the later axis varying fastest."""
    spec = StudySpec.from_document(
        BASE, grid=["mechanism.params.sigma_max=0.5,1", "model.k=5,10,20"], seeds="1"
    )
    assert spec.points() == [
        {"mechanism.params.sigma_max": s, "model.k": k} for s in (0.5, 1) for k in (5, 10, 20)
    ]


def test_zip_axes_vary_together_and_combine_with_the_grid() -> None:
    """Zipped axes give one row per index; the grid multiplies them."""
    spec = StudySpec.from_document(
        BASE,
        grid=["model.k=5,10"],
        zipped=["mechanism.name=blip,jlt", "mechanism.params.epsilon=1,2"],
    )
    assert spec.points() == [
        {"model.k": k, "mechanism.name": m, "mechanism.params.epsilon": e}
        for k in (5, 10)
        for m, e in (("blip", 1), ("jlt", 2))
    ]


def test_the_sweep_table_gives_the_same_study_as_the_command_line() -> None:
    """Dotted keys (nested tables in TOML), quoted keys and a seed count in [sweep] give the
    study --grid/--seeds give, and its study file reads back to the same identity."""
    doc = tomllib.loads(
        """
        [run]
        name = "s"
        seed = 10
        [data]
        dataset = "synthetic"
        [sweep]
        seeds = 3
        [sweep.grid]
        mechanism.params.sigma_max = [0.5, 1]
        "model.k" = [5, 10]
        """
    )
    from_file = StudySpec.from_document(doc)
    from_cli = StudySpec.from_document(
        BASE, grid=["mechanism.params.sigma_max=0.5,1", "model.k=5,10"], seeds="3"
    )
    assert from_file.identity() == from_cli.identity()
    assert from_file.seeds == (10, 11, 12)  # the base seed + 0..N-1
    again = StudySpec.from_document(tomllib.loads(from_file.to_toml()))
    assert again.identity() == from_file.identity()


def test_command_line_axes_replace_the_files_and_seeds_override() -> None:
    doc = {**BASE, "sweep": {"seeds": 2, "grid": {"model.k": [5, 10]}}}
    spec = StudySpec.from_document(doc, grid=["model.k=7"], seeds="0,4")
    assert [a.values for a in spec.axes] == [(7,)]
    assert spec.seeds == (0, 4)


def test_runs_resolve_each_config_and_name_it_by_its_hash() -> None:
    """Each run's configuration has the point's values and its seed; the directory name is
    the hash of that resolved config (the same config, the same name; a different one, a
    different name)."""
    spec = StudySpec.from_document(BASE, grid=["mechanism.params.sigma_max=0.5,1"], seeds="2")
    runs = spec.runs()
    assert [(r.point, r.seed) for r in runs] == [(0, 10), (1, 10), (0, 11), (1, 11)]
    assert runs[1].config.mechanism.params == {"sigma_max": 1}
    assert runs[3].config.run.seed == 11
    assert len({r.name for r in runs}) == 4
    same = ExperimentConfig.from_dict(tomllib.loads(runs[0].config.to_toml()))
    assert run_name(same) == runs[0].name


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"grid": ["model.kk=1,2"]}, "model.kk: unknown key"),
        ({"grid": ["model.k=a,b"]}, "model.k: expected int, got 'a'"),
        ({"grid": ["model.k="]}, "--grid model.k: the axis has no values"),
        ({"grid": ["model.k"]}, "--grid: expected KEY=VALUE"),
        ({"grid": ["model.k=1,1"]}, "--grid model.k: value 1 is given twice"),
        ({"grid": ["run.seed=1,2"]}, "the seeds are not an axis; use --seeds"),
        ({"grid": ["model.k=1,2"], "zipped": ["model.k=3,4"]}, "model.k: the axis is given twice"),
        ({"zipped": ["model.k=1,2", "model.clip=true"]}, "--zip: zipped axes vary together"),
        ({"seeds": "0"}, "--seeds: must be a count >= 1"),
        ({"seeds": "-1"}, "--seeds: must be a count >= 1"),
        ({"seeds": "1,1"}, "--seeds: a seed is given twice"),
        ({"seeds": "x"}, "--seeds: must be a count >= 1 or a list of seeds, got 'x'"),
        ({"grid": ["data.n_folds=1,2"]}, "data.n_folds: must be an int >= 2, got 1"),
    ],
)
def test_bad_axes_and_seeds_are_refused_naming_the_key(
    kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError) as exc:
        StudySpec.from_document(BASE, **kwargs).runs()  # type: ignore[arg-type]
    assert message in str(exc.value)
    assert "\n" not in str(exc.value)


def test_the_sweep_table_refuses_unknown_keys() -> None:
    with pytest.raises(ConfigError, match=r"sweep\.grdi: unknown key"):
        StudySpec.from_document({**BASE, "sweep": {"grdi": {}}})


def test_parse_axis_reads_toml_values() -> None:
    """Arrays stay whole (an attacks axis), bare words are strings, numbers typed."""
    axis = parse_axis('adversary.attacks=["rpt_bayes"],["rpt_spectral","rpt_bayes"]')
    assert axis.values == (["rpt_bayes"], ["rpt_spectral", "rpt_bayes"])
    assert parse_axis("mechanism.params.epsilon=1,2.5").values == (1, 2.5)


def test_parse_seeds_forms() -> None:
    assert parse_seeds("3", 5) == (5, 6, 7)
    assert parse_seeds(2, 0) == (0, 1)
    assert parse_seeds([4, 0], 9) == (4, 0)
    assert parse_seeds("7,3", 0) == (7, 3)


def test_from_axes_takes_python_values() -> None:
    """The API's form: ranges and lists; a string where a list belongs is refused."""
    base = ExperimentConfig.from_dict(BASE)
    spec = StudySpec.from_axes(base, {"model.k": range(5, 7)}, seeds=[1, 2])
    assert spec.points() == [{"model.k": 5}, {"model.k": 6}]
    assert spec.seeds == (1, 2)
    with pytest.raises(ConfigError, match="needs a list of values"):
        StudySpec.from_axes(base, {"mechanism.name": "blip"})


STUDIES = sorted((Path(__file__).resolve().parents[4] / "configs" / "studies").glob("*.toml"))


@pytest.mark.parametrize("path", STUDIES, ids=[p.stem for p in STUDIES])
def test_the_committed_study_files_load(path: Path) -> None:
    """Each study file in configs/studies/ reads to a study whose runs all validate, and
    `privrec sim` refuses it, saying to use `privrec sweep`."""
    spec = StudySpec.load(path)
    assert spec.axes and len(spec.runs()) == len(spec.points()) * len(spec.seeds)
    with pytest.raises(ConfigError, match="privrec sweep --config FILE"):
        ExperimentConfig.load(path)
