"""The reference table and the health table (issue 15): what a value means before it is judged,
the verdict of each key metric of the last training step, and the table in JSON, the cached
results and the rich, Markdown and HTML reports."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from rich.console import Console

from logscope import health
from logscope.analyze import analyze_paths
from logscope.cli.render import render_report, skipped_line
from logscope.health import REFERENCES, TRAPS, trap_for
from logscope.ingest.console import read_text
from logscope.report import Report, Skipped
from logscope.synthetic import simulate
from tests._short_logs import (
    CRITIC,
    analyze,
    config_dump,
    excerpt,
    grpo_config,
    healthy,
    step_line,
)

SCHEMA = json.loads((Path(__file__).parent.parent / "docs" / "report.schema.json").read_text())


def rows(report: Report) -> dict[str, health.HealthRow]:
    return {r.key if r.key != "mfu" else r.metric: r for r in report.health}


# ---- the reference table ---------------------------------------------------------------------


def test_every_reference_row_is_complete_and_names_a_concept() -> None:
    from logscope.aliases import ALIASES

    for ref in REFERENCES.values():
        assert ref.concept in ALIASES, ref.key
        assert ref.label and ref.unit is not None and ref.rule and ref.source, ref.key
        low, high = ref.healthy
        assert low is None or high is None or low < high, ref.key
    for trap in TRAPS:
        assert trap.meaning and trap.source and trap.verdict in health.VERDICTS


def test_per_algorithm_ranges() -> None:
    kl = REFERENCES["kl_ref"]
    assert kl.healthy_range("grpo") == (None, 0.05)
    assert kl.healthy_range("ppo") == (None, 0.1)


@pytest.mark.parametrize(
    ("metric", "value", "resolution", "verdict"),
    [
        ("perf/mfu/actor", 0.0, None, "not measured"),
        ("perf/mfu/actor_infer", 0.0, None, "not measured"),
        ("mfu/actor", 1.7, None, "unreliable"),
        ("timing_s/agent_loop/num_preempted/max", -1.0, None, "not measured"),
        ("actor/lr", 0.0, 0.0005, "rounded"),
        ("actor/lr", 0.0, None, None),  # a repr log's 0 is a 0
        ("perf/mfu/actor", 0.4, None, None),
    ],
)
def test_traps(metric: str, value: float, resolution: float | None, verdict: str | None) -> None:
    trap = trap_for(metric, value, resolution)
    assert (trap.verdict if trap else None) == verdict


# ---- the table on made-up steps --------------------------------------------------------------


def test_healthy_step_is_all_ok() -> None:
    table = rows(analyze(excerpt(healthy(), config=grpo_config())))
    for key in ("entropy", "kl_ref", "ppo_kl", "pg_clipfrac", "actor_grad_norm"):
        assert table[key].verdict == "ok", key
    assert table["response_clip_ratio"].verdict == "ok"
    assert table["response_clip_ratio"].note == "max 1024 / cap 1024"
    assert table["score"].display == "0.55 (0–1)" and table["score"].verdict == "ok"
    assert table["gen_share"].display == "34%" and table["gen_share"].verdict == "ok"
    assert table["actor_grad_norm"].healthy == "≤ 5"
    assert "actor_rollout_ref.actor.grad_clip" in table["actor_grad_norm"].note


def test_the_clip_scales_the_grad_norm_range() -> None:
    config = grpo_config()
    config["actor_rollout_ref"]["actor"]["grad_clip"] = 0.5
    table = rows(analyze(excerpt(healthy(**{"actor/grad_norm": 3.1}), config=config)))
    assert (
        table["actor_grad_norm"].healthy == "≤ 2.5" and table["actor_grad_norm"].verdict == "high"
    )


def test_entropy_not_logged_is_said_never_zero() -> None:
    table = rows(analyze(excerpt(healthy(**{"actor/entropy": None}))))
    row = table["entropy"]
    assert row.verdict == "not logged" and row.value is None and "not 0" in row.note


def test_rows_of_absent_metrics_are_left_out_except_the_key_ones() -> None:
    table = rows(analyze(excerpt({"actor/pg_loss": 0.1, "actor/grad_norm": 0.3})))
    assert set(table) == {
        "entropy",
        "actor_grad_norm",
        "response_clip_ratio",
        "score",
        "gen_share",
    }
    assert table["actor_grad_norm"].verdict == "ok"


def test_mfu_zero_and_preemptions_minus_one_are_not_measured() -> None:
    step = healthy(**{
        "perf/mfu/actor_infer": 0.0,
        "timing_s/agent_loop/num_preempted/max": -1.0,
    })  # fmt: skip
    table = rows(analyze(excerpt(step)))
    assert table["perf/mfu/actor_infer"].verdict == "not measured"
    assert "not measured" in table["perf/mfu/actor_infer"].note
    assert table["perf/mfu/actor"].verdict == "ok"
    assert table["num_preempted"].verdict == "not measured"


def test_mfu_above_one_is_unreliable_and_low_mfu_is_low() -> None:
    table = rows(analyze(excerpt(healthy(**{"perf/mfu/actor": 1.6}))))
    assert table["perf/mfu/actor"].verdict == "unreliable"
    table = rows(analyze(excerpt(healthy(**{"perf/mfu/actor": 0.04}))))
    assert table["perf/mfu/actor"].verdict == "low"


def test_3f_zeros_are_rounded_not_zero() -> None:
    table = rows(analyze(excerpt(healthy(**{"actor/ppo_kl": 0.0002}), three=True)))
    assert table["lr"].display == "0" and table["lr"].verdict == "rounded"
    assert table["ppo_kl"].verdict == "rounded" and "5e-4" in table["ppo_kl"].note


def test_all_equal_scores_and_zero_advantages_are_constant() -> None:
    zero = {
        "critic/score/mean": 0.0, "critic/score/max": 0.0, "critic/score/min": 0.0,
        "critic/advantages/mean": 0.0, "critic/advantages/max": 0.0,
        "critic/advantages/min": 0.0,
    }  # fmt: skip
    table = rows(analyze(excerpt(healthy(**zero), three=True)))
    assert table["score"].verdict == "constant" and table["advantages"].verdict == "constant"


def test_nan_is_not_finite() -> None:
    table = rows(analyze(excerpt(healthy(**{"actor/grad_norm": float("nan")}))))
    assert table["actor_grad_norm"].verdict == "not finite"


def test_critic_rows_for_ppo() -> None:
    step = healthy(**{**CRITIC, "critic/vf_explained_var": -0.8, "critic/grad_norm": 65.5})
    table = rows(analyze(excerpt(step, first=40)))
    assert table["vf_explained_var"].verdict == "low"
    assert table["critic_grad_norm"].verdict == "high"
    assert table["kl_ref"].healthy == "≤ 0.1"  # PPO's KL band


def test_last_training_step_is_used_and_step_zero_is_not_one() -> None:
    val = {"val-core/gsm8k/acc/mean@1": 0.2}
    text = step_line(0, val) + step_line(1, healthy()) + step_line(2, healthy(**{
        "actor/entropy": 0.2,
    }))  # fmt: skip
    run = read_text(text)
    assert health.training_steps(run) == [1, 2]
    table = rows(analyze(run))
    assert table["entropy"].step == 2 and table["entropy"].value == 0.2


def test_recent_level_skips_sentinels_and_takes_the_median() -> None:
    steps = [healthy(**{"perf/mfu/actor": v}) for v in (0.3, 0.0, 0.5)]
    level = health.recent_level(excerpt(*steps), "mfu")
    assert level is not None and level.steps == (1, 3) and level.value == pytest.approx(0.4)


def test_long_runs_have_a_table_but_do_not_print_it() -> None:
    report = analyze(simulate(60, "ppo", seed=5).to_run())
    assert report.health and not report.show_health


# ---- JSON, cache and renderers ---------------------------------------------------------------


def test_json_carries_the_health_list_and_validates() -> None:
    report = analyze(excerpt(healthy(), config=grpo_config()))
    data = json.loads(report.to_json())
    assert data["schema"] == "logscope.report/1"
    jsonschema.validate(data, SCHEMA)
    keys = [r["key"] for r in data["health"]]
    assert keys[:2] == ["entropy", "kl_ref"]
    assert {"display", "healthy", "verdict", "note", "step", "value"} <= set(data["health"][0])


def test_schema_rejects_an_unknown_verdict() -> None:
    data = json.loads(analyze(excerpt(healthy())).to_json())
    data["health"][0]["verdict"] = "fine"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, SCHEMA)


def test_cached_results_round_trip_the_health_table(tmp_path: Path) -> None:
    log = tmp_path / "excerpt.log"
    log.write_text(config_dump(grpo_config()) + step_line(1, healthy()))
    (first,) = analyze_paths([log], store_dir=tmp_path / "store")
    (second,) = analyze_paths([log], store_dir=tmp_path / "store")
    assert first.health and second.health == first.health
    assert second.to_dict()["health"] == first.to_dict()["health"]


def _rich(report: Report) -> str:
    console = Console(record=True, width=140, color_system=None)
    render_report(report, console)
    return console.export_text()


def test_rich_prints_the_table_for_a_short_run() -> None:
    out = _rich(analyze(excerpt(healthy(**{"actor/entropy": None}))))
    assert "Health of the last training step (step 1)" in out
    assert "not logged" in out and "no entropy key in the log (not 0)" in out
    assert "34%" in out


def test_rich_leaves_the_table_out_of_long_runs() -> None:
    out = _rich(analyze(simulate(40, "grpo", seed=2).to_run()))
    assert "Health of the last training step" not in out


def test_markdown_and_html_carry_the_table() -> None:
    report = analyze(excerpt(healthy(**{"response_length/clip_ratio": 0.2})))
    md = report.to_markdown()
    assert "## Health of the last training step (step 1)" in md
    assert "| response clip ratio | 0\\.2 | ≤ 0\\.1 | high |" in md
    page = report.to_html()
    assert "<h2>Health of the last training step</h2>" in page
    assert "<td>response clip ratio</td><td>0.2</td>" in page


def test_skipped_line_names_few_and_counts_many() -> None:
    report = analyze(excerpt(healthy()))
    report.skipped = [Skipped("LS1", "a-b", "r"), Skipped("LS2", "c-d", "r")]
    assert skipped_line(report) == "not applicable here (2): a-b, c-d"
    report.skipped = [Skipped(f"LS{i}", f"name-{i}", "r") for i in range(30)]
    line = skipped_line(report)
    assert line.startswith("not applicable here: 30 ") and "--format json" in line
    assert "name-3" not in line
