"""Project settings (`[tool.logscope]` / `logscope.toml` / `--config`): found, checked, applied."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from logscope.detectors.registry import matching
from typer.testing import CliRunner

from logscope import settings
from logscope.analyze import analyze_paths
from logscope.check import check_command
from logscope.cli.main import app
from logscope.settings import SettingsError
from logscope.tail import TailSession

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "diagnoses"
RUNNER = CliRunner()
# LS101 fires twice on this fixture, LS102 once (fixtures/diagnoses/LS101.expected.json)
KL_LOG = FIXTURES / "LS101.log"
QUIET_KL_JUMP = """
[diagnoses.kl-jump]
min_ratio = 1000.0
min_ppo_kl_ratio = 1000.0
z_threshold = 1000.0
spike_z = 1000.0
"""
COMMAND = [
    "python3",
    "-m",
    "verl.trainer.main_ppo",
    "data.train_batch_size=100",
    "actor_rollout_ref.rollout.n=3",
]


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project folder holding the KL fixture two levels down; the cwd is elsewhere."""
    runs = tmp_path / "project" / "runs" / "a"
    runs.mkdir(parents=True)
    shutil.copy(KL_LOG, runs / "verl.log")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    return tmp_path / "project"


def codes(path: Path, **kw) -> list[tuple[str, str]]:
    (report,) = analyze_paths([path], use_cache=False, **kw)
    return [(f.code, f.severity) for f in report.findings]


def test_without_a_settings_file_the_defaults_apply(project):
    assert codes(project / "runs/a/verl.log") == [
        ("LS101", "warning"),
        ("LS101", "warning"),
        ("LS102", "warning"),
    ]


def test_pyproject_table_found_upward_sets_parameters_severity_and_ignore(project):
    (project / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.logscope]\nignore = ["kl-out-of-band"]\n'
        "[tool.logscope.diagnoses.LS101]\nseverity = 'error'\n"
    )
    assert codes(project / "runs/a/verl.log") == [("LS101", "error"), ("LS101", "error")]
    (project / "pyproject.toml").write_text(
        "[tool.logscope]\n" + QUIET_KL_JUMP.replace("[diagnoses", "[tool.logscope.diagnoses")
    )
    assert codes(project / "runs/a/verl.log") == [("LS102", "warning")]


def test_a_pyproject_without_the_table_is_passed_over_and_logscope_toml_wins(project):
    (project / "logscope.toml").write_text('ignore = ["LS102"]\n')
    (project / "runs" / "pyproject.toml").write_text("[tool.ruff]\nline-length = 99\n")
    assert settings.find(project / "runs/a/verl.log") == project / "logscope.toml"
    (project / "pyproject.toml").write_text('[tool.logscope]\nignore = ["LS101"]\n')
    assert settings.find(project / "runs/a/verl.log") == project / "logscope.toml"
    assert codes(project / "runs/a/verl.log") == [("LS101", "warning"), ("LS101", "warning")]


def test_the_working_directory_is_searched_when_the_input_has_none(project, tmp_path):
    Path("logscope.toml").write_text('ignore = ["LS1"]\n')  # the cwd (elsewhere/)
    assert codes(project / "runs/a/verl.log") == []


def test_config_option_wins_over_the_file_found(project, tmp_path):
    (project / "logscope.toml").write_text('ignore = ["LS101"]\n')
    named = tmp_path / "strict.toml"
    named.write_text('select = ["LS101"]\n')
    with settings.using(named):
        assert codes(project / "runs/a/verl.log") == [("LS101", "warning"), ("LS101", "warning")]
    assert codes(project / "runs/a/verl.log") == [("LS102", "warning")]


def test_only_replaces_select_and_skip_adds_to_ignore(project):
    (project / "logscope.toml").write_text('select = ["LS102"]\nignore = ["LS0"]\n')
    log = project / "runs/a/verl.log"
    assert codes(log) == [("LS102", "warning")]
    assert codes(log, only=["kl-jump"]) == [("LS101", "warning"), ("LS101", "warning")]
    assert codes(log, skip=["LS102"]) == []


def test_code_prefix_selects_the_family_and_a_full_code_only_itself():
    assert {c.code for c in matching("LS5")} >= {"LS501", "LS518"}
    assert all(c.code.startswith("LS1") for c in matching("ls1"))
    assert [c.code for c in matching("LS101")] == ["LS101"]


def test_cached_findings_are_not_reused_when_the_settings_change(project, tmp_path):
    log = project / "runs/a/verl.log"
    store = tmp_path / "store"

    def cached() -> list[str]:
        (report,) = analyze_paths([log], store_dir=store)
        return [f.code for f in report.findings]

    assert cached() == ["LS101", "LS101", "LS102"]
    (project / "logscope.toml").write_text('ignore = ["LS101"]\n')
    assert cached() == ["LS102"]
    (project / "logscope.toml").unlink()
    assert cached() == ["LS101", "LS101", "LS102"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('selct = ["LS101"]', "unknown setting selct; did you mean 'select'?"),
        ('ignore = ["LS999"]', "ignore: no diagnosis called 'LS999'"),
        ('ignore = "LS101"', "ignore must be a list of diagnosis codes or names"),
        (
            "[diagnoses.kl-jmp]",
            "diagnoses.kl-jmp: no diagnosis called 'kl-jmp'; did you mean 'kl-jump'?",
        ),
        (
            "[diagnoses.kl-jump]\nmin_ratio = 0.5",
            "diagnoses.kl-jump.min_ratio must be a number > 1, got 0.5",
        ),
        (
            "[diagnoses.kl-jump]\nwindow = 2.5",
            "diagnoses.kl-jump.window must be an integer ≥ 3, got 2.5",
        ),
        (
            "[diagnoses.kl-jump]\nwindow = true",
            "diagnoses.kl-jump.window must be an integer ≥ 3, got True",
        ),
        ("[diagnoses.kl-jump]\nwnidow = 21", "has no parameter 'wnidow'; did you mean 'window'?"),
        ('[diagnoses.LS101]\nseverity = "fatal"', "diagnoses.LS101.severity must be one of info"),
        ("[diagnoses.LS101]\n[diagnoses.kl-jump]", "kl-jump: LS101 (kl-jump) is configured twice"),
        ("x = [", "not valid TOML"),
    ],
)
def test_a_bad_value_is_an_error_naming_file_key_and_valid_range(tmp_path, text, message):
    file = tmp_path / "logscope.toml"
    file.write_text(text + "\n")
    with pytest.raises(SettingsError) as err:
        settings.load(file)
    assert str(err.value).startswith(f"{file}: ")
    assert message in str(err.value)


def test_pyproject_keys_are_named_with_their_table(tmp_path):
    file = tmp_path / "pyproject.toml"
    file.write_text("[tool.logscope.diagnoses.kl-jump]\nmin_ratio = 0\n")
    with pytest.raises(SettingsError, match=r"tool\.logscope\.diagnoses\.kl-jump\.min_ratio must"):
        settings.load(file)


def test_cli_bad_settings_exit_2_with_the_message(project):
    (project / "logscope.toml").write_text("[diagnoses.kl-jump]\nmin_ratio = 0.5\n")
    result = RUNNER.invoke(app, ["analyze", str(project / "runs/a/verl.log"), "--no-cache"])
    assert result.exit_code == 2
    assert "min_ratio must be a number > 1, got 0.5" in " ".join(result.output.split())


def test_cli_config_option_on_analyze_and_a_missing_file(project, tmp_path):
    named = tmp_path / "s.toml"
    named.write_text('[diagnoses.LS102]\nseverity = "critical"\n')
    log = str(project / "runs/a/verl.log")
    result = RUNNER.invoke(
        app, ["analyze", log, "--no-cache", "-f", "json", "--config", str(named)]
    )
    assert result.exit_code == 1, result.output
    severities = {f["code"]: f["severity"] for f in json.loads(result.stdout)["findings"]}
    assert severities == {"LS101": "warning", "LS102": "critical"}
    missing = RUNNER.invoke(app, ["analyze", log, "--config", str(tmp_path / "nope.toml")])
    assert missing.exit_code == 2
    assert "no such settings file" in " ".join(missing.output.split())


def test_check_honours_the_settings_of_the_working_directory(project):
    before = {(f.code, f.severity) for f in check_command(COMMAND)[0].findings}
    assert ("LS511", "info") in before and ("LS504", "error") in before
    Path("logscope.toml").write_text(
        'ignore = ["seed-unset"]\n[diagnoses.LS504]\nseverity = "info"\n'
    )
    after = {(f.code, f.severity) for f in check_command(COMMAND)[0].findings}
    assert not any(code == "LS511" for code, _ in after)
    assert {s for code, s in after if code == "LS504"} == {"info"}


def test_check_config_after_the_double_dash(project, tmp_path):
    named = tmp_path / "s.toml"
    named.write_text('select = ["LS511"]\n')
    result = RUNNER.invoke(
        app, ["check", "--", *COMMAND, "--format", "json", "--config", str(named)]
    )
    assert result.exit_code == 0, result.output
    assert [f["code"] for f in json.loads(result.stdout)["findings"]] == ["LS511"]


def test_tail_builds_its_detectors_from_the_followed_files_settings(project):
    (project / "logscope.toml").write_text("[diagnoses.kl-jump]\nwindow = 21\n")
    session = TailSession(project / "runs/a/verl.log")
    try:
        (kl,) = [d for d in session.detectors if d.code == "LS101"]
        assert kl.window == 21
    finally:
        session.close()


def test_rules_shows_the_valid_range_and_the_value_the_settings_set(project):
    Path("logscope.toml").write_text("[diagnoses.kl-jump]\nwindow = 21\nseverity = 'error'\n")
    result = RUNNER.invoke(app, ["rules", "kl-jump", "-f", "json"])
    assert result.exit_code == 0, result.output
    item = json.loads(result.stdout)
    assert item["parameter_ranges"]["window"] == "an integer ≥ 3"
    assert item["parameters"]["window"] == 15  # the default stays the default
    assert item["settings"] == {
        "file": str(Path.cwd() / "logscope.toml"),
        "parameters": {"window": 21},
        "severity": "error",
    }
    shown = " ".join(RUNNER.invoke(app, ["rules", "kl-jump"]).output.split())
    assert "Severity: error" in shown
    assert "window │ 15 │ an integer ≥ 3 │ 21 *" in shown
    assert "* set in /" in shown  # the path itself may wrap
