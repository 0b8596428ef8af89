"""`logscope explain KEY|RUN`: exit codes, JSON shape, close matches, the run table."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from logscope.cli.main import app
from logscope.synthetic import simulate, write_console_log

ROOT = Path(__file__).resolve().parents[1]
TUNED = ROOT / "fixtures" / "verl_tuned.log"
runner = CliRunner()


def _explain(*args: str, store: Path | None = None) -> tuple[int, str, str]:
    extra = ["--store", str(store)] if store is not None else []
    result = runner.invoke(app, ["explain", *args, *extra])
    return result.exit_code, result.stdout, result.stderr


def test_explain_key_json(tmp_path: Path) -> None:
    code, out, _ = _explain("actor/ppo_kl", "--format", "json")
    assert code == 0
    data = json.loads(out)
    assert data["schema"] == "logscope.explain/1" and data["kind"] == "metric"
    assert data["key"] == "actor/ppo_kl" and data["entry"] == "ppo_kl"
    for field in ("meaning", "unit", "versions", "trainers", "healthy", "traps", "diagnoses"):
        assert data[field], field
    assert data["healthy"][0]["healthy"] == "≤ 0.02"
    assert "https://arxiv.org/abs/1707.06347" in data["healthy"][0]["source"]  # cited
    assert {"LS101", "LS103"} <= {d["code"] for d in data["diagnoses"]}
    assert data["source"].startswith("verl source: https://github.com/")


def test_explain_concrete_keys_of_patterns() -> None:
    code, out, _ = _explain("rollout_corr/chi2_token", "-f", "json")
    assert code == 0
    data = json.loads(out)
    assert data["entry"] == "rollout_corr"
    assert any(r["key"] == "rollout_corr/chi2_token" for r in data["ranges"])
    code, out, _ = _explain("val-core/openai/gsm8k/reward/mean@1", "-f", "json")
    assert code == 0 and json.loads(out)["entry"] == "val_core"
    code, out, _ = _explain("perf/mfu/actor", "-f", "json")
    data = json.loads(out)
    assert code == 0 and {t["verdict"] for t in data["value_traps"]} >= {"not measured"}


def test_explain_key_rich_and_markdown(tmp_path: Path) -> None:
    code, out, _ = _explain("actor/entropy")
    assert code == 0 and "nats/token" in out and "0.1–2" in out
    target = tmp_path / "entropy.md"
    code, _, _ = _explain("actor/entropy", "-f", "markdown", "-o", str(target))
    text = target.read_text(encoding="utf-8")
    assert code == 0 and text.startswith("# `actor/entropy`") and "## Traps" in text


def test_unknown_key_exits_2_with_close_matches() -> None:
    code, out, err = _explain("actor/ppo_kll", "-f", "json")
    assert code == 2 and out == ""
    assert "unknown metric key" in err and "actor/ppo_kl" in err
    code, _, err = _explain("zzzz")
    assert code == 2 and "close matches" not in err
    code, _, err = _explain("")
    assert code == 2 and "empty" in err


def test_explain_run_json(tmp_path: Path) -> None:
    code, out, _ = _explain(str(TUNED), "-f", "json", "--no-cache", store=tmp_path)
    assert code == 0
    data = json.loads(out)
    assert data["schema"] == "logscope.explain/1" and data["kind"] == "runs"
    (run,) = data["runs"]
    groups = {g["entry"]: g for g in run["groups"]}
    assert {"entropy", "ppo_kl", "score", "time_gen"} <= set(groups)
    rows = {r["key"]: r for g in run["groups"] for r in g["metrics"]}
    for row in rows.values():
        assert set(row) == {"key", "step", "last", "last_text", "median", "healthy", "verdict",
                            "note"}  # fmt: skip
    assert rows["actor/entropy"]["healthy"] == "0.1–2" and rows["actor/entropy"]["verdict"] == "ok"
    assert rows["actor/ppo_kl"]["verdict"] == "ok"
    assert rows["critic/score/mean"]["verdict"] == "no range"
    assert rows["timing_s/gen"]["healthy"].startswith("< 60%")
    assert run["unknown"] == {"count": 0, "names": []}


def test_explain_run_reports_unknown_keys_and_traps(tmp_path: Path) -> None:
    sim = simulate(12, "grpo", seed=0, version="0.9")
    log = tmp_path / "run.log"
    write_console_log(sim, log)
    text = log.read_text(encoding="utf-8")
    assert " - actor/entropy:" in text
    text = text.replace(" - actor/entropy:", " - my_fork/secret_metric:1.5 - actor/entropy:")
    text = text.replace(" - actor/entropy:", " - perf/mfu/critic:0.0 - actor/entropy:")
    log.write_text(text, encoding="utf-8")
    code, out, _ = _explain(str(log), "-f", "json", "--no-cache", store=tmp_path / "s")
    assert code == 0
    (run,) = json.loads(out)["runs"]
    assert run["unknown"] == {"count": 1, "names": ["my_fork/secret_metric"]}
    rows = {r["key"]: r for g in run["groups"] for r in g["metrics"]}
    assert rows["perf/mfu/critic"]["verdict"] == "not measured"  # MFU 0: the trap, not "low"
    assert "not measured" in rows["perf/mfu/critic"]["note"]
    assert rows["actor/entropy"]["verdict"] in ("ok", "low", "high")
    verdicts = {r["verdict"] for r in rows.values()}
    assert verdicts <= {
        "ok", "low", "high", "constant", "rounded", "not measured", "not logged", "not finite",
        "unreliable", "no range",
    }  # fmt: skip


def test_explain_run_rich_and_markdown(tmp_path: Path) -> None:
    code, out, _ = _explain(str(TUNED), "--no-cache", store=tmp_path)
    assert code == 0 and "actor/entropy" in out and "every key is in the registry" in out
    code, out, _ = _explain(str(TUNED), "-f", "markdown", "--no-cache", store=tmp_path)
    assert code == 0 and "| family | key |" in out and "Keys not in the registry: 0" in out


def test_output_never_overwrites_the_input(tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    log.write_text(TUNED.read_text(encoding="utf-8"), encoding="utf-8")
    code, _, err = _explain(str(log), "-o", str(log), store=tmp_path / "s")
    assert code == 2 and "refusing" in err
    assert log.read_text(encoding="utf-8") == TUNED.read_text(encoding="utf-8")


def test_the_run_table_fits_an_80_column_terminal_and_keeps_the_notes():
    log = str(Path(__file__).resolve().parents[1] / "fixtures" / "verl_tuned.log")
    result = runner.invoke(app, ["explain", log, "--no-cache"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert max(len(line) for line in result.output.splitlines()) <= 80
    assert "clip 1" in result.output  # the grad-norm row's note, under its key
    wide = runner.invoke(app, ["explain", log, "--no-cache"], env={"COLUMNS": "140"})
    assert "│ note" in wide.output.replace("┃", "│")


def test_explain_knows_every_key_of_other_frameworks_fixtures() -> None:
    """Every key a framework fixture holds has an explain entry (its concept's verl family, or
    what the framework's profile says of it)."""
    from logscope.cli.explain import explain_key
    from logscope.ingest import load

    root = Path(__file__).resolve().parents[1] / "fixtures"
    paths = [*root.glob("frameworks/**/*.log"), *root.glob("frameworks/**/*.jsonl")]
    paths += list(root.glob("trl/*/checkpoint-*/trainer_state.json"))
    keys = {k for p in paths for run in load(p) for k in run.metric_names}
    assert len(keys) > 100
    entries = {k: explain_key(k) for k in keys}
    assert all(e["meaning"] and e["source"] for e in entries.values())
    assert entries["completions/clipped_ratio"]["verl_equivalent"] == "response_length/clip_ratio"
