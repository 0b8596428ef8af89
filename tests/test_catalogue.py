"""Generic checks for EVERY registered detector, and the generated catalogue.

Parametrized over `registry.detector_classes()`, so a new detector is checked as soon as its
module exists: docstring sections, code/name conventions, explicit parameters (each value out
of its declared range raises), robustness on empty / short / all-NaN runs; its positive example
(fixtures/diagnoses/<code>.*, written by scripts/gen_diagnosis_fixtures.py) fires, and on it
detection is deterministic, blind to the row order of the metrics frame and leaves the run
unchanged; plus docs/diagnoses.md freshness and the `logscope rules` command.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib.util
import inspect
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from logscope.detectors import registry
from typer.testing import CliRunner

from logscope import catalogue
from logscope.aliases import ALIASES, LOSS_LIKE_PREFIXES
from logscope.check import check_path
from logscope.detector import CATALOGUE_SECTIONS, PARAM_KINDS, Detector
from logscope.exceptions import BadDetectorParameters
from logscope.ingest import load
from logscope.model import SEVERITIES, Finding
from tests import _foundation_logs as L

CLASSES = registry.detector_classes()
IDS = [f"{c.code}-{c.name}" for c in CLASSES]
ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures" / "diagnoses"
SECTION_LINE = re.compile(r"^\s*(" + "|".join(map(re.escape, CATALOGUE_SECTIONS)) + r"):\s*$")


def every_metric_name() -> list[str]:
    names = {n for names in ALIASES.values() for n in names}
    names |= {p + "mean" if p.endswith("/") else p for p in LOSS_LIKE_PREFIXES}
    names |= {"val-core/openai/gsm8k/acc/mean@1", "val/test_score/openai/gsm8k"}
    return sorted(names)


def run_with(values_for, n_steps: int, events_text: str = "", config=None):
    names = every_metric_name()
    steps = np.arange(1, n_steps + 1)
    series = {name: values_for(name, steps) for name in names}
    return L.make_run(series, steps=steps, events=L.events_from_text(events_text), config=config)


def empty_run():
    return L.make_run()


def three_step_run():
    return run_with(lambda name, s: 0.1 + 0.01 * s, 3, L.GRAD_NORM_FEW)


def all_nan_run():
    return run_with(lambda name, s: np.full(len(s), np.nan), 30, L.GENERIC_CRASH)


# ---- docstring = catalogue entry --------------------------------------------------------------


@pytest.mark.parametrize("cls", CLASSES, ids=IDS)
def test_docstring_has_all_sections_in_order_and_non_empty(cls):
    doc = inspect.getdoc(cls) or ""
    headings = [m.group(1) for line in doc.splitlines() if (m := SECTION_LINE.match(line))]
    assert headings == list(CATALOGUE_SECTIONS), f"{cls.code}: sections {headings}"
    entry = catalogue.entry(cls)
    assert entry["summary"], f"{cls.code}: no summary paragraph before the sections"
    for title in CATALOGUE_SECTIONS:
        assert entry["sections"][title].strip(), f"{cls.code}: empty section {title!r}"


@pytest.mark.parametrize("cls", CLASSES, ids=IDS)
def test_code_name_title_severity_reads(cls):
    assert re.fullmatch(r"LS\d{3}", cls.code), cls.code
    assert re.fullmatch(r"[a-z0-9]+(?:-[a-z0-9]+)*", cls.name), cls.name
    assert cls.title and cls.title.strip() == cls.title
    assert cls.default_severity in SEVERITIES
    assert cls.reads in ("metrics", "events", "config")
    for concept in cls.concepts:
        assert concept in ALIASES, f"{cls.code}: unknown concept {concept!r}"


def test_codes_and_names_are_unique():
    codes = [c.code for c in CLASSES]
    names = [c.name for c in CLASSES]
    assert len(set(codes)) == len(codes)
    assert len(set(names)) == len(names), sorted(n for n in names if names.count(n) > 1)
    assert not set(codes) & set(names)


@pytest.mark.parametrize("cls", CLASSES, ids=IDS)
def test_init_has_explicit_stored_keyword_params(cls):
    sig = inspect.signature(cls.__init__)
    params = [p for name, p in sig.parameters.items() if name != "self"]
    for p in params:
        assert p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL), f"{cls.code}: *{p.name}"
        assert p.default is not inspect.Parameter.empty, f"{cls.code}: {p.name} has no default"
    detector = cls()
    for p in params:
        assert hasattr(detector, p.name), f"{cls.code}: {p.name} not stored as an attribute"
        assert getattr(detector, p.name) == p.default
    assert detector.params() == {p.name: p.default for p in params}
    assert repr(detector).startswith(cls.__name__ + "(")


def out_of_range_values(field: dataclasses.Field) -> list[object]:
    """Values its declaration rejects: past each bound, of a wrong type, a bool."""
    bounds, kind = field.metadata["bounds"], PARAM_KINDS[field.type]
    values: list[object] = ["3", True, *([1.5] if kind is int else [])]
    values += [b for b in (bounds.gt, bounds.lt) if b is not None]
    values += [bounds.ge - 1] if bounds.ge is not None else []
    values += [bounds.le + 1] if bounds.le is not None else []
    return values


BAD_PARAMS = [
    (cls, f.name, value)
    for cls in CLASSES
    if dataclasses.is_dataclass(cls)
    for f in dataclasses.fields(cls)
    for value in out_of_range_values(f)
]


@pytest.mark.parametrize(
    ("cls", "name", "value"),
    BAD_PARAMS,
    ids=[f"{c.code}-{n}={v!r}" for c, n, v in BAD_PARAMS],
)
def test_out_of_range_parameter_raises_naming_it(cls, name, value):
    with pytest.raises(BadDetectorParameters) as raised:
        cls(**{name: value})
    message = str(raised.value)
    assert cls.name in message and name in message and repr(value) in message, message


# ---- robustness, determinism, no mutation ------------------------------------------------------


@pytest.mark.parametrize(
    "make", [empty_run, three_step_run, all_nan_run], ids=["empty", "3-step", "all-nan"]
)
@pytest.mark.parametrize("cls", CLASSES, ids=IDS)
def test_detect_never_raises_on_degenerate_runs(cls, make):
    run = make()
    detector = cls()
    reason = detector.skip_reason(run)
    assert reason is None or isinstance(reason, str)
    findings = detector.detect(run)
    assert isinstance(findings, list)
    for f in findings:
        assert isinstance(f, Finding)
        assert (f.code, f.name) == (cls.code, cls.name)
        assert f.severity in SEVERITIES
        json.dumps(f.to_dict(), allow_nan=False)


# ---- one positive example per diagnosis (fixtures/diagnoses/, scripts/gen_diagnosis_fixtures.py)


def example_path(cls) -> Path:
    """The one committed input `cls` fires on."""
    found = sorted(FIXTURES.glob(f"{cls.code}.*"))
    assert len(found) == 1, (
        f"{cls.code}: expected one fixtures/diagnoses/{cls.code}.*, found {found}: add a recipe "
        "to scripts/gen_diagnosis_fixtures.py and run it"
    )
    return found[0]


def example_run(cls):
    """The run of `cls`'s example: a log as `analyze` reads it, a launch script as `check` does."""
    path = example_path(cls)
    if path.suffix == ".log":
        (run,) = load(path)
        return run
    (report,) = check_path(path)
    return report.run


@pytest.mark.parametrize("cls", CLASSES, ids=IDS)
def test_positive_example_fires(cls):
    findings = cls().detect(example_run(cls))
    assert [f.code for f in findings if f.code == cls.code], (cls.code, findings)
    assert all((f.code, f.name) == (cls.code, cls.name) for f in findings)


@pytest.mark.parametrize("cls", CLASSES, ids=IDS)
def test_deterministic_and_does_not_mutate_input(cls):
    run = example_run(cls)
    metrics_before = run.metrics.clone()
    config_before = copy.deepcopy(run.config_segments)
    events_before = copy.deepcopy(run.events)
    meta_before = copy.deepcopy(run.meta)
    first = [f.to_dict() for f in cls().detect(run)]
    second = [f.to_dict() for f in cls().detect(run)]
    assert first, f"{cls.code}: its example must fire for this check to mean anything"
    assert first == second
    assert run.metrics.equals(metrics_before)
    assert run.metrics.schema == metrics_before.schema
    assert run.config_segments == config_before
    assert run.events == events_before
    assert run.meta == meta_before


@pytest.mark.parametrize("cls", CLASSES, ids=IDS)
def test_detect_on_shuffled_metric_rows_gives_same_findings(cls):
    """Row order of the long frame is not part of the contract."""
    run = example_run(cls)
    shuffled = copy.copy(run)
    shuffled.__dict__ = {k: v for k, v in run.__dict__.items() if not k.startswith("_")}
    shuffled.metrics = run.metrics.sample(fraction=1.0, shuffle=True, seed=1)
    expected = [f.to_dict() for f in cls().detect(run)]
    assert expected, f"{cls.code}: its example must fire for this check to mean anything"
    assert [f.to_dict() for f in cls().detect(shuffled)] == expected


def test_every_example_is_a_registered_diagnosis():
    codes = {cls.code for cls in CLASSES}
    assert sorted(p.stem for p in FIXTURES.glob("LS*") if p.stem not in codes) == []


def test_gen_fixtures_check_mode(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location(
        "gen_diagnosis_fixtures", ROOT / "scripts" / "gen_diagnosis_fixtures.py"
    )
    gen = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, gen)  # its dataclasses look their module up
    spec.loader.exec_module(gen)
    only = ["--only", "LS001", "LS017", "LS503", "--output", str(tmp_path)]
    assert gen.main(["--check", *only]) == 1  # missing
    assert gen.main(only) == 0
    assert gen.main(["--check", *only]) == 0
    for name in ("LS001.log", "LS017.log", "LS503.sh"):
        assert (tmp_path / name).read_text() == (FIXTURES / name).read_text(), name
    (tmp_path / "LS503.sh").write_text("edit\n")
    assert gen.main(["--check", *only]) == 1


# ---- the generated catalogue and the CLI --------------------------------------------------------


def test_diagnoses_md_is_fresh():
    path = ROOT / "docs" / "diagnoses.md"
    assert path.exists(), "run: python scripts/gen_diagnoses.py"
    assert path.read_text(encoding="utf-8") == catalogue.render_markdown(), (
        "docs/diagnoses.md is stale: run `python scripts/gen_diagnoses.py` and commit it"
    )


def test_render_markdown_lists_every_detector_once():
    text = catalogue.render_markdown()
    assert text.startswith(catalogue.GENERATED_HEADER)
    for cls in CLASSES:
        assert text.count(f"\n## {cls.code} `{cls.name}`\n") == 1
        assert f"| [{cls.code}](#{cls.code.lower()}-{cls.name})" in text


@pytest.mark.parametrize("cls", CLASSES, ids=IDS)
def test_entry_text_and_json(cls):
    text = catalogue.render_entry_text(cls.code)
    assert text.startswith(f"{cls.code} {cls.name} ")
    positions = [text.index(f"\n{title}:\n") for title in CATALOGUE_SECTIONS]
    assert positions == sorted(positions)
    assert catalogue.entry(cls.name) == catalogue.entry(cls.code.lower())
    json.dumps(catalogue.entry(cls))


def test_gen_script_check_mode(tmp_path):
    spec = importlib.util.spec_from_file_location(
        "gen_diagnoses", ROOT / "scripts" / "gen_diagnoses.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / "diagnoses.md"
    assert module.main(["--check", "--output", str(out)]) == 1  # missing
    assert module.main(["--output", str(out)]) == 0
    assert module.main(["--check", "--output", str(out)]) == 0
    out.write_text(out.read_text() + "edit\n")
    assert module.main(["--check", "--output", str(out)]) == 1


def _cli():
    from logscope.cli.main import app

    return CliRunner(), app


def test_cli_rules_lists_every_code():
    runner, app = _cli()
    result = runner.invoke(app, ["rules"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    for cls in CLASSES:
        assert cls.code in result.output and cls.name in result.output


def test_cli_rules_json_and_one_entry():
    runner, app = _cli()
    result = runner.invoke(app, ["rules", "--format", "json"])
    assert result.exit_code == 0
    assert [e["code"] for e in json.loads(result.stdout)] == [c.code for c in CLASSES]
    result = runner.invoke(app, ["rules", "cuda-oom", "--format", "json"])
    assert result.exit_code == 0
    entry = json.loads(result.stdout)
    assert entry["code"] == "LS010" and list(entry["sections"]) == list(CATALOGUE_SECTIONS)
    result = runner.invoke(app, ["rules", "LS010"], env={"COLUMNS": "120"})
    assert result.exit_code == 0
    for title in CATALOGUE_SECTIONS:
        assert title in result.output
    result = runner.invoke(app, ["rules", "ls001", "--format", "markdown"])
    assert result.exit_code == 0 and result.stdout.startswith("# LS001 `non-finite-metric`")


def test_cli_rules_unknown_code_exits_2_listing_known():
    runner, app = _cli()
    result = runner.invoke(app, ["rules", "LS999"])
    assert result.exit_code == 2
    combined = result.output + (result.stderr if result.stderr_bytes is not None else "")
    assert "LS999" in combined and "LS001" in combined


def test_registry_find_is_case_insensitive_and_select_filters():
    assert registry.find("LS010") is registry.find("ls010") is registry.find("cuda-oom")
    chosen = registry.select(only=["LS001", "cuda-oom"])
    assert sorted(d.code for d in chosen) == ["LS001", "LS010"]
    assert all(isinstance(d, Detector) for d in chosen)
