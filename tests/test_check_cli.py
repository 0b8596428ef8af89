"""`logscope check` on the command line: inputs, formats, exit codes, --fix."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from logscope.cli import app

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "check"
runner = CliRunner()
VERL = ["python3", "-m", "verl.trainer.main_ppo"]


def invoke(*args: str):
    return runner.invoke(app, ["check", *args])


def test_tuned_script_exits_0_and_json_has_the_schema():
    result = invoke(str(FIXTURES / "run_ppo_tuned.sh"), "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    reports = data if isinstance(data, list) else data.get("reports", [data])
    report = reports[0]
    assert report["schema"] == "logscope.report/1" and report["kind"] == "check"
    assert report["run"]["source"]["kind"] == "verl-command"
    assert {f["severity"] for f in report["findings"]} <= {"info"}


def test_command_after_double_dash_with_error_exits_1():
    result = invoke(
        "--format",
        "markdown",
        "--",
        *VERL,
        "algorithm.adv_estimator=grpo",
        "actor_rollout_ref.rollout.n=1",
    )
    assert result.exit_code == 1
    assert "grpo-group-size" in result.stdout


def test_fail_on_threshold():
    args = [
        "--",
        *VERL,
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
    ]
    assert invoke("--fail-on", "error", "-f", "json", *args).exit_code == 0
    assert invoke("--fail-on", "info", "-f", "json", *args).exit_code == 1
    assert (
        invoke(
            "--fail-on", "never", "-f", "json", "--", *VERL, "actor_rollout_ref.rollout.n=0"
        ).exit_code
        == 0
    )


def test_unparseable_override_exits_2_naming_the_token():
    result = invoke("--", *VERL, "trainer.logger=console,wandb")
    assert result.exit_code == 2
    assert "trainer.logger=console,wandb" in result.output
    assert "key=[a,b]" in result.output  # the hint survives rich markup


def test_unparseable_script_exits_2(tmp_path):
    script = tmp_path / "run.sh"
    script.write_text("python3 -m verl.trainer.main_ppo \\\n  data.x='oops\n")
    result = invoke(str(script))
    assert result.exit_code == 2
    assert "unterminated single quote" in result.output


def test_fix_prints_the_command_with_suggestions_and_leaves_the_file(tmp_path):
    script = tmp_path / "run.sh"
    original = (FIXTURES / "run_ppo_baseline.sh").read_text()
    script.write_text(original)
    result = invoke(str(script), "--fix")
    assert script.read_text() == original
    out = result.stdout
    assert out.startswith(original.split("PYTHONUNBUFFERED")[0])  # the script, edited in place
    assert "\nPYTHONUNBUFFERED=1 python3 -m verl.trainer.main_ppo \\\n" in out
    for expected in (
        "actor_rollout_ref.rollout.gpu_memory_utilization=0.65",
        "actor_rollout_ref.rollout.max_num_seqs=1896",
        "actor_rollout_ref.rollout.max_num_batched_tokens=16384",
        "data.max_response_length=256",
        "algorithm.kl_ctrl.kl_coef=0.0005",
    ):
        assert expected in out
    assert "gpu_memory_utilization=0.4 " not in out
    # the fixed command parses and has nothing at warning or above
    fixed = tmp_path / "fixed.sh"
    fixed.write_text(out)
    assert invoke(str(fixed), "--fail-on", "warning", "-f", "json").exit_code == 0


def test_options_after_the_command_are_still_ours():
    result = invoke("--", *VERL, "actor_rollout_ref.rollout.n=8", "--fix")
    assert result.exit_code in (0, 1)
    assert "python3 -m verl.trainer.main_ppo" in result.stdout


def test_output_file_and_html(tmp_path):
    out = tmp_path / "r.html"
    result = invoke(str(FIXTURES / "run_ppo_baseline.sh"), "-f", "html", "-o", str(out))
    assert result.exit_code == 0
    assert "response-length-mismatch" in out.read_text()


def test_nothing_to_check_exits_2():
    assert invoke().exit_code == 2
    assert invoke("--", "echo", "hello").exit_code == 2


def test_script_on_stdin():
    text = (FIXTURES / "run_ppo_tuned.sh").read_text()
    result = runner.invoke(app, ["check", "-", "-f", "json"], input=text)
    assert result.exit_code == 0, result.output
    assert '"<stdin>"' in result.stdout


# ---- issue 17: --fix edits the script in place, minimally; missing files --------------------------

import difflib  # noqa: E402

REALISTIC = """\
#!/usr/bin/env bash
set -x
export VLLM_ATTENTION_BACKEND=XFORMERS
# GRPO on GSM8K; extra overrides come from the caller
python3 -m verl.trainer.main_ppo \\
    algorithm.adv_estimator=grpo \\
    data.train_batch_size=64 \\
    data.max_prompt_length=512 \\
    data.max_response_length=512 \\
    data.seed=1 \\
    actor_rollout_ref.model.path=/models/Qwen2.5-0.5B-Instruct \\
    actor_rollout_ref.actor.ppo_mini_batch_size=16 \\
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4 \\
    actor_rollout_ref.actor.shuffle=True \\
    actor_rollout_ref.rollout.n=5 \\
    actor_rollout_ref.rollout.gpu_memory_utilization=0.6 \\
    trainer.n_gpus_per_node=8 \\
    "$@" 2>&1 | tee verl.log
echo done
"""


def _changes(before: str, after: str) -> tuple[list[str], list[str]]:
    removed, added = [], []
    for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0):
        if line.startswith(("---", "+++", "@@")):
            continue
        (removed if line.startswith("-") else added).append(line[1:])
    return removed, added


def test_fix_keeps_every_line_it_does_not_change(tmp_path):
    script = tmp_path / "run.sh"
    script.write_text(REALISTIC)
    result = invoke(str(script), "--fix")
    assert result.exit_code in (0, 1), result.output
    removed, added = _changes(REALISTIC, result.stdout)
    # n 5 → 4 alone clears LS503/LS504/LS516: the train batch stays 64
    assert removed == ["    actor_rollout_ref.rollout.n=5 \\"]
    assert added == [
        "    actor_rollout_ref.rollout.n=4 \\",
        "    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=16 \\",
        "    actor_rollout_ref.rollout.max_num_batched_tokens=16384 \\",
        "    actor_rollout_ref.rollout.max_num_seqs=1896 \\",
    ]
    lines = result.stdout.splitlines()
    # the new overrides sit before "$@" and the redirection, inside the same command
    assert lines.index('    "$@" 2>&1 | tee verl.log') > lines.index(added[-1])
    fixed = tmp_path / "fixed.sh"
    fixed.write_text(result.stdout)
    assert invoke(str(fixed), "--fail-on", "info", "-f", "json").exit_code == 0
    assert script.read_text() == REALISTIC


def test_fix_on_stdin_edits_the_script_too():
    result = runner.invoke(app, ["check", "-", "--fix"], input=REALISTIC)
    assert result.stdout.startswith("#!/usr/bin/env bash\nset -x\nexport VLLM")
    assert "actor_rollout_ref.rollout.n=4 \\\n" in result.stdout


def test_fix_replaces_a_misspelled_key_in_place(tmp_path, monkeypatch):
    """An unknown-key finding names the key as typed (`replaces`); --fix swaps the token."""
    from logscope.detectors.config_lint import ConfigRule

    import logscope.check as check
    from logscope.model import Advice

    typo = "actor_rollout_ref.actor.ppo_mirco_batch_size_per_gpu"
    right = "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"

    class UnknownKey(ConfigRule):
        code, name, title = "LS599", "unknown-key-stand-in", "Unknown key"

        def check(self, view):
            return []

        def detect(self, run):
            if typo not in run.meta.get("explicit_keys", []):
                return []
            value = run.config()["actor_rollout_ref"]["actor"]["ppo_mirco_batch_size_per_gpu"]
            advice = Advice(right, None, value, f"{right}={value}", "did you mean?", "verl")
            finding = self.finding(
                severity="error",
                title="Unknown key",
                message=f"unknown key {typo}",
                evidence={"replaces": typo},
                advice=[advice],
            )
            return [finding]

    rules = check.config_rules()
    monkeypatch.setattr(check, "config_rules", lambda path=None: [*rules, UnknownKey()])
    text = REALISTIC.replace(f"{right}=4", f"{typo}=4").replace("rollout.n=5", "rollout.n=4")
    text = text.replace(
        "    trainer.n_gpus",
        "    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=16 \\\n"
        "    actor_rollout_ref.rollout.max_num_batched_tokens=16384 \\\n"
        "    actor_rollout_ref.rollout.max_num_seqs=1896 \\\n    trainer.n_gpus",
    )
    reports = check.check_text(text)
    assert any(f.code == "LS599" for f in reports[0].findings)
    fixed = check.fix_reports(reports, text)
    removed, added = _changes(text, fixed)
    assert removed == [f"    {typo}=4 \\"] and added == [f"    {right}=4 \\"]


def test_missing_file_says_no_such_file():
    result = invoke("nope.sh")
    assert result.exit_code == 2
    assert "no such file: nope.sh" in result.output
    assert "no verl trainer" not in result.output


def test_check_names_the_algorithm_as_analyze_does():
    """adv_estimator=gae is PPO: `check` says "ppo" like `analyze`, not "gae"."""
    from logscope.check import check_command

    (report,) = check_command(
        ["python3", "-m", "verl.trainer.main_ppo", "algorithm.adv_estimator=gae"]
    )
    assert report.run.meta["algorithm"] == "ppo"
