"""Typed keys and values against verl's own config tree (LS517 unknown-config-key, LS518
config-value-type), the schema data behind them, and that neither fires on correct commands."""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from logscope import verl_schema as schema
from logscope.analyze import analyze_run
from logscope.check import check_command, check_path, check_yaml
from logscope.cli import app
from logscope.ingest import load
from logscope.ingest.pasted import quoted_items
from logscope.model import ConfigSegment, Run, Source

ROOT = Path(__file__).resolve().parents[1]
REAL_LOGS = ROOT.parent / "shared" / "real_logs"
TRAINER = ["python3", "-m", "verl.trainer.main_ppo"]
KEY_CODES = ("LS517", "LS518")
TYPO = "actor_rollout_ref.actor.ppo_mirco_batch_size_per_gpu"
RIGHT = "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"


def key_findings(*tokens: str, version: str | None = None, code: str | None = None):
    reports = check_command([*TRAINER, *tokens], version=version)
    return [f for r in reports for f in r.findings if f.code in ((code,) if code else KEY_CODES)]


# ---- LS517: the two keys of the issue --------------------------------------------------------


def test_misspelled_key_is_an_error_with_the_real_key_as_fix():
    (finding,) = key_findings(f"{TYPO}=8", code="LS517")
    newest = schema.releases()[-1]
    assert finding.severity == "error"
    assert finding.message == (
        f"unknown key {TYPO} (not in verl {newest}'s config) — did you mean {RIGHT}?"
    )
    assert finding.evidence["replaces"] == TYPO
    (advice,) = finding.advice
    assert advice.override == f"{RIGHT}=8"
    assert advice.parameter == RIGHT


def test_unknown_key_without_a_close_match_says_how_to_add_it():
    (finding,) = key_findings("actor_rollout_ref.rollout.foo_bar=3", code="LS517")
    assert finding.severity == "error"
    assert "unknown key actor_rollout_ref.rollout.foo_bar (not in verl" in finding.message
    assert "did you mean" not in finding.message
    assert "+actor_rollout_ref.rollout.foo_bar=3" in finding.message
    assert finding.advice == [] and "replaces" not in finding.evidence


@pytest.mark.parametrize("prefix", ["+", "++"])
def test_hydra_adds_are_never_reported(prefix):
    tokens = [f"{prefix}actor_rollout_ref.rollout.foo_bar=3", f"{prefix}{TYPO}=8"]
    assert key_findings(*tokens) == []


def test_a_key_added_with_plus_may_be_set_again_later():
    assert key_findings("+trainer.my_key=1", "trainer.my_key=2", "trainer.my_key.sub=3") == []


@pytest.mark.parametrize(
    "typo, meant",
    [
        ("actor_rollout_ref.rolout.n=4", "actor_rollout_ref.rollout.n"),
        ("trainer.totl_epochs=3", "trainer.total_epochs"),
        ("data.max_promt_length=512", "data.max_prompt_length"),
        ("ray_init.num_cpus=8", "ray_kwargs.ray_init.num_cpus"),  # moved under ray_kwargs (0.6)
    ],
)
def test_suggestions_are_real_keys_and_the_fix_is_the_meant_one(typo, meant):
    (finding,) = key_findings(typo, code="LS517")
    tree = schema.tree()
    assert finding.evidence["suggestions"] and all(
        tree.has(s) for s in finding.evidence["suggestions"]
    )
    assert finding.advice[0].override == f"{meant}={typo.split('=', 1)[1]}"


def test_ambiguous_suggestions_are_listed_but_not_applied():
    (finding,) = key_findings(
        "actor_rollout_ref.actor.log_prob_micro_batch_size_per_gpu=16", code="LS517"
    )
    assert "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu" in finding.message
    assert "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu" in finding.message
    assert finding.advice == []


def test_key_below_a_free_content_value_needs_plus_on_a_command_line():
    token = "actor_rollout_ref.model.override_config.attn_implementation=eager"
    (finding,) = key_findings(token, code="LS517")
    assert "actor_rollout_ref.model.override_config holds free content" in finding.message
    assert finding.advice[0].override == "+" + token
    assert key_findings("+" + token) == []


def test_key_below_a_free_content_value_is_fine_in_a_yaml(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text(
        "actor_rollout_ref:\n  model:\n    override_config:\n      attn_implementation: eager\n"
        "  rollout:\n    engine_kwargs:\n      vllm:\n        swap_space: 4\n",
        encoding="utf-8",
    )
    assert [f for f in check_yaml(path)[0].findings if f.code in KEY_CODES] == []


def test_yaml_typo_is_an_error_and_an_unknown_new_key_a_warning(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("data:\n  max_promt_length: 512\n  my_own_key: 1\n", encoding="utf-8")
    found = {f.evidence["key"]: f for f in check_yaml(path)[0].findings if f.code == "LS517"}
    assert found["data.max_promt_length"].severity == "error"
    assert found["data.max_promt_length"].advice[0].override == "data.max_prompt_length=512"
    assert found["data.my_own_key"].severity == "warning"


def test_deleting_a_key_that_does_not_exist_is_reported():
    (finding,) = key_findings("~trainer.totl_epochs", code="LS517")
    assert finding.advice[0].override == "~trainer.total_epochs"


def test_unknown_key_inside_a_dict_value_is_reported():
    (finding,) = key_findings("actor_rollout_ref.rollout.val_kwargs={top_p:0.9,tmperature:0}")
    assert finding.evidence["key"] == "actor_rollout_ref.rollout.val_kwargs.tmperature"
    assert "in the value of actor_rollout_ref.rollout.val_kwargs" in finding.message


# ---- versions ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "typed, release",
    [
        (None, "0.9.1"),
        ("0.9", "0.9.1"),
        ("0.5", "0.5.0"),
        ("0.3", "0.3.0.post1"),
        ("0.4.2", "0.4.1"),
        ("0.5.0.dev0", "0.5.0"),
        ("0.2.0.post1", "0.2.0.post1"),
    ],
)
def test_release_for_a_typed_version(typed, release):
    assert schema.release_for(typed) == release


def test_a_removed_key_is_judged_by_the_chosen_version_and_names_its_releases():
    token = "actor_rollout_ref.actor.fsdp_config.grad_offload=False"
    assert key_findings(token, version="0.2") == []
    (finding,) = key_findings(token, version="0.9", code="LS517")
    assert "not in verl 0.9.1's config; verl 0.1–0.2.0.post2 have it" in finding.message
    assert finding.advice == []  # a removed key is not a misspelling of another one


def test_a_renamed_key_suggests_its_new_names():
    (finding,) = key_findings("actor_rollout_ref.actor.checkpoint.contents=[model]", code="LS517")
    assert "verl 0.3.0.post0–0.4.0 have it" in finding.message
    assert finding.evidence["suggestions"] == [
        "actor_rollout_ref.actor.checkpoint.load_contents",
        "actor_rollout_ref.actor.checkpoint.save_contents",
    ]


def test_a_newer_key_on_an_older_version_points_to_verl_version():
    (finding,) = key_findings("actor_rollout_ref.rollout.mode=async", version="0.2", code="LS517")
    assert "pass --verl-version if you run a newer verl than 0.2" in finding.message


def test_old_keys_of_a_real_old_command_pass_under_their_version():
    tokens = ["data.val_batch_size=512", "actor_rollout_ref.actor.ppo_micro_batch_size=8"]
    assert key_findings(*tokens, version="0.1") == []


def test_megatron_keys_need_the_megatron_config():
    token = "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2"
    assert key_findings(token, code="LS517")
    assert key_findings("--config-name=ppo_megatron_trainer", token) == []
    assert key_findings("model_engine=megatron", token) == []  # verl ≥ 0.7.1's group choice


def test_a_group_choice_without_a_flattened_config_skips_the_key_check():
    (report,) = check_command([*TRAINER, "model_engine=mindspeed", "trainer.foo=1"])
    assert not [f for f in report.findings if f.code == "LS517"]
    assert any(s.code == "LS517" and "model_engine=mindspeed" in s.reason for s in report.skipped)


def test_recipe_mains_skip_the_key_check_but_not_the_type_check():
    argv = ["python3", "-m", "recipe.dapo.main_dapo", "algorithm.filter_groups.enable=True"]
    (report,) = check_command([*argv, "data.train_batch_size=abc"])
    assert [f.code for f in report.findings if f.code in KEY_CODES] == ["LS518"]
    assert any(s.code == "LS517" and "recipe" in s.reason for s in report.skipped)


def test_keys_of_the_users_own_config_file_are_known(tmp_path):
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "mine.yaml").write_text(
        "defaults:\n  - ppo_trainer\n  - _self_\nalgorithm:\n  filter_groups:\n    enable: false\n",
        encoding="utf-8",
    )
    script = tmp_path / "run.sh"
    script.write_text(
        "python3 -m verl.trainer.main_ppo --config-path=cfg --config-name=mine \\\n"
        "    algorithm.filter_groups.enable=True trainer.totl_epochs=1\n",
        encoding="utf-8",
    )
    found = [f.evidence["key"] for r in check_path(script) for f in r.findings if f.code == "LS517"]
    assert found == ["trainer.totl_epochs"]


# ---- LS518: value types --------------------------------------------------------------------------


def test_word_for_a_numeric_key_is_an_error_naming_key_and_value():
    (finding,) = key_findings("data.train_batch_size=abc", code="LS518")
    assert finding.severity == "error"
    assert finding.message.startswith("data.train_batch_size=abc: verl 0.9.1's config has an int")
    assert finding.evidence == {
        "key": "data.train_batch_size",
        "value": "abc",
        "expected": "int",
        "verl_version": "0.9.1",
    }


@pytest.mark.parametrize(
    "token",
    [
        "data.train_batch_size=${oc.env:BS}",
        "data.train_batch_size=$BS",
        "data.train_batch_size=$((2 * 64))",
        "data.train_batch_size='512'",
        "actor_rollout_ref.actor.optim.lr=1e-6",
        "trainer.val_before_train=False",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=auto",  # null default: untyped
    ],
)
def test_interpolations_variables_and_numbers_are_not_type_errors(token):
    assert key_findings(token, code="LS518") == []


def test_word_for_a_bool_key_is_an_error():
    (finding,) = key_findings("trainer.val_before_train=no", code="LS518")
    assert "'no' is not true or false" in finding.message


# ---- no false alarms -------------------------------------------------------------------------------


@pytest.mark.parametrize("script", sorted((ROOT / "fixtures").rglob("*.sh")), ids=lambda p: p.name)
def test_fixture_scripts_raise_no_key_finding_but_their_own(script):
    """Every launch script under fixtures/ uses real keys, except the positive examples of
    these two diagnoses (fixtures/diagnoses/LS517.sh, LS518.sh), which raise just theirs."""
    codes = [f.code for r in check_path(script) for f in r.findings if f.code in KEY_CODES]
    assert codes == ([script.stem] if script.stem in KEY_CODES else [])


def test_readme_and_docs_commands_raise_the_key_findings_they_show():
    """Every command in the README and docs/check.md raises no key finding, except an example
    whose printed output shows one (the README's misspelled key): that one raises exactly it."""
    texts = [
        (ROOT / "README.md").read_text("utf-8"),
        (ROOT / "docs" / "check.md").read_text("utf-8"),
    ]
    examples = []
    for text in texts:
        for m in re.finditer(r"python3 -m verl\.trainer\.main_ppo[^\n`]*", text):
            shown = re.split(r"\n\$ |\n```", text[m.end() :], maxsplit=1)[0]
            examples.append((m.group(0), sorted(set(re.findall(r"LS51[78]", shown)))))
    assert examples and any(codes for _, codes in examples)
    for command, codes in examples:
        tokens = [w for w in command.split()[3:] if "=" in w and "…" not in w]
        assert sorted({f.code for f in key_findings(*tokens)}) == codes, command


def _launch_lines() -> list[tuple[str, str | None, list[str]]]:
    """(file, verl version from its name, overrides) of Hydra's `Error executing job with
    overrides` lines in the real logs: runs that got past Hydra, so every key was valid."""
    out = []
    for path in sorted(REAL_LOGS.glob("*.log")) if REAL_LOGS.is_dir() else []:
        text = path.read_text("utf-8", errors="replace")
        match = re.search(r"Error executing job with overrides: \[(.*)", text)
        version = re.search(r"verl(\d)(\d)", path.name)
        if match:
            release = f"{version.group(1)}.{version.group(2)}" if version else None
            out.append((path.name, release, quoted_items(match.group(1))))
    return out


@pytest.mark.skipif(not REAL_LOGS.is_dir(), reason=f"{REAL_LOGS} is absent")
@pytest.mark.parametrize("name, version, overrides", _launch_lines(), ids=lambda v: str(v)[:12])
def test_real_launch_lines_raise_no_key_finding(name, version, overrides):
    assert overrides
    assert [f.message for f in key_findings(*overrides, version=version)] == []


def test_analyze_and_check_of_a_log_never_judge_its_keys(tmp_path):
    config = {
        "actor_rollout_ref": {"actor": {"ppo_mirco_batch_size_per_gpu": 8}},
        "data": {"train_batch_size": "abc"},
        "fork_only": {"x": 1},
    }
    run = Run(
        id="log",
        source=Source("verl-console", "x.log"),
        meta={"verl_version": "0.9"},
        config_segments=[ConfigSegment(1, config)],
    )
    assert [f for f in analyze_run(run).findings if f.code in KEY_CODES] == []
    for logged in load(ROOT / "fixtures" / "verl_tuned.log"):
        assert [f for f in analyze_run(logged).findings if f.code in KEY_CODES] == []
    reports = check_path(ROOT / "fixtures" / "verl_tuned.log")
    assert [f for r in reports for f in r.findings if f.code in KEY_CODES] == []


# ---- --fix ----------------------------------------------------------------------------------------


def test_fix_corrects_the_misspelled_key_in_place():
    result = CliRunner().invoke(app, ["check", "--fix", "--", *TRAINER, f"{TYPO}=8"])
    assert f"{RIGHT}=8" in result.stdout
    assert TYPO not in result.stdout


def test_fix_output_has_no_key_finding_left():
    free = "actor_rollout_ref.model.override_config.attn_implementation=eager"
    result = CliRunner().invoke(app, ["check", "--fix", "--", *TRAINER, f"{TYPO}=8", free])
    assert f"+{free}" in result.stdout
    fixed = [w for w in result.stdout.split() if "=" in w]
    assert key_findings(*fixed, code="LS517") == []


# ---- the schema data ----------------------------------------------------------------------------


def test_schema_data_is_shipped_and_consistent():
    data = schema.data()
    releases = data["versions"]
    assert releases[0] == "0.1" and releases[-1] == schema.release_for(None)
    assert set(schema.trainers()) >= {"ppo_trainer", "ppo_megatron_trainer"}
    for key, spans in data["keys"].items():
        for first, last, kind, codes in spans:
            assert releases.index(first) <= releases.index(last), key
            assert kind in {"int", "float", "bool", "str", "list", "dict", "null", "any"}
            assert codes and set(codes) <= set(data["trainers"])
    assert schema.tree("0.9.1").types["data.train_batch_size"] == "int"


def test_generator_reads_a_wheel_into_spans(tmp_path):
    pytest.importorskip("omegaconf")  # the generator's own dependency, not logscope's
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen", ROOT / "scripts" / "gen_verl_schema.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    for version, body in (("0.1", "a:\n  b: 1\n  c: {}\n"), ("0.2", "a:\n  b: x\n  d: ${a.b}\n")):
        with zipfile.ZipFile(tmp_path / f"verl-{version}-py3-none-any.whl", "w") as zf:
            zf.writestr("verl/trainer/config/ppo_trainer.yaml", body)
    data = gen.generate(tmp_path, ["0.2", "0.1"], fetch=False)
    assert data["versions"] == ["0.1", "0.2"]
    assert data["keys"] == {
        "a.b": [["0.1", "0.1", "int", "p"], ["0.2", "0.2", "str", "p"]],
        "a.c": [["0.1", "0.1", "dict", "p"]],
        "a.d": [["0.2", "0.2", "str", "p"]],
    }
    assert json.loads(gen.render(data)) == data


def test_check_help_names_the_schemas_newest_release():
    from logscope.cli.check import NEWEST_VERL

    assert NEWEST_VERL == schema.release_for(None)
