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
    assert out.startswith("PYTHONUNBUFFERED=1 python3 -m verl.trainer.main_ppo \\\n")
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
