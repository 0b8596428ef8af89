"""TRL / Hugging Face Trainer files, read from what TRL's GRPOTrainer itself wrote.

The fixtures under fixtures/trl/ come from `scripts/make_trl_fixtures.py` (a real GRPO run on
CPU; versions in fixtures/trl/VERSIONS.json): each run's `trainer_state.json`, its printed log
and its TensorBoard file hold the same logging events, so the three readers must agree.
"""

from __future__ import annotations

import gzip
import json
import math
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from logscope.cli import app
from logscope.ingest import discover, hf_trainer_log, hf_trainer_state, load
from logscope.model import Run

ROOT = Path(__file__).resolve().parent.parent
TRL = ROOT / "fixtures" / "trl"
HEALTHY = TRL / "grpo_healthy"  # tqdm on, transformers 5 printer (.4g strings), save_state()
TRUNCATED = TRL / "grpo_truncated"  # max_completion_length=3, transformers 4 printer, ckpts only
KIND_LOG = hf_trainer_log.KIND
HF_KINDS = {hf_trainer_state.KIND, KIND_LOG}
#: the shared real logs sit beside the checkout (CI) or beside its worktree folder
REAL_LOGS = [
    p
    for base in (ROOT.parent, ROOT.parent.parent)
    for p in sorted((base / "shared" / "real_logs").glob("*.log"))
]


def _entries(path: Path) -> list[dict]:
    return json.loads(path.read_text())["log_history"]


def _log_lines(path: Path) -> list[str]:
    """The log's lines, split on "\\n" only (tqdm's "\\r" stays inside its line)."""
    return path.read_bytes().decode("utf-8").split("\n")


def _values(run: Run) -> dict[tuple[int, str], float]:
    return {(s, m): v for s, m, v in run.metrics.select("step", "metric", "value").iter_rows()}


def _same(a: float, b: float, rel: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=rel, abs_tol=1e-12)


def _tb_key(key: str) -> str:
    """The name transformers' `rewrite_logs` gives a key in TensorBoard and W&B."""
    return "eval/" + key[5:] if key.startswith("eval_") else "train/" + key


# ---- trainer_state.json -------------------------------------------------------------------


def test_trainer_state_holds_every_logged_value_under_its_own_key() -> None:
    path = TRUNCATED / "checkpoint-12" / "trainer_state.json"
    (run,) = load(path)
    assert run.source.kind == "hf-trainer-state"
    assert run.meta["framework"] == "trl"
    assert run.meta["hf_trainer_state"]["logging_steps"] == 1
    assert run.meta["experiment"] == "grpo_truncated"
    got = _values(run)
    expected = {
        (e["step"], k): float("nan") if v is None else float(v)
        for e in _entries(path)
        for k, v in e.items()
        if k != "step"
    }
    assert got.keys() == expected.keys()
    assert all(_same(got[k], v, 0.0) for k, v in expected.items())
    assert {"kl", "completions/clipped_ratio", "frac_reward_zero_std", "reward"} <= set(
        run.metric_names
    )
    assert run.parse_stats.step_lines == 12 and run.parse_stats.skipped_lines == 0


def test_output_dir_reads_the_latest_checkpoint_by_number() -> None:
    """checkpoint-12 is newer than checkpoint-6, though "6" sorts after "12" as text."""
    (run,) = hf_trainer_state.read(TRUNCATED)
    assert Path(run.source.path) == TRUNCATED / "checkpoint-12" / "trainer_state.json"
    assert run.metrics.get_column("step").max() == 12
    assert any("the latest of 2" in note for note in run.parse_stats.notes)
    (older,) = load(TRUNCATED / "checkpoint-6")
    assert older.metrics.get_column("step").max() == 6
    assert "a later one is checkpoint-12/trainer_state.json" in older.parse_stats.notes[0]


def test_final_state_wins_over_its_checkpoint_at_the_same_step() -> None:
    """save_state()'s file has the step of the last checkpoint plus the summary entry."""
    (run,) = hf_trainer_state.read(HEALTHY)
    assert Path(run.source.path) == HEALTHY / "trainer_state.json"
    assert run.has_metric("train_runtime")


def test_folder_discovery_finds_the_output_dir_once() -> None:
    found, passed = discover(TRUNCATED)
    kinds = sorted((str(p.relative_to(TRUNCATED)), m.KIND) for p, m in found)
    assert kinds == [
        (".", "tensorboard"),
        ("checkpoint-12/trainer_state.json", "hf-trainer-state"),
        ("train.log", KIND_LOG),
    ]
    assert not passed
    runs = load(TRUNCATED)
    assert sorted(r.source.kind for r in runs) == sorted(
        ["hf-trainer-state", "tensorboard", KIND_LOG]
    )


def test_cut_off_trainer_state_keeps_the_entries_before_the_cut(tmp_path: Path) -> None:
    source = TRUNCATED / "checkpoint-12" / "trainer_state.json"
    text = source.read_text()
    cut = text.index('"step": 8')  # inside the 8th entry
    damaged = tmp_path / "trainer_state.json"
    damaged.write_text(text[:cut])
    (run,) = load(damaged)
    assert sorted(set(run.metrics.get_column("step"))) == list(range(1, 8))
    assert run.parse_stats.skipped_lines == 1
    assert run.parse_stats.skip_reasons == {"cut off": 1}
    whole = _values(load(source)[0])
    assert all(_same(v, whole[k], 0.0) for k, v in _values(run).items())


def test_garbled_entry_loses_only_itself(tmp_path: Path) -> None:
    source = TRUNCATED / "checkpoint-12" / "trainer_state.json"
    entries = _entries(source)
    text = source.read_text()
    start = text.index('"completions/clipped_ratio"', text.index('"step": 4'))
    garbled = text[:start] + "<<garbage>>" + text[start + 40 :]
    damaged = tmp_path / "trainer_state.json"
    damaged.write_text(garbled)
    (run,) = load(damaged)
    assert run.parse_stats.skip_reasons == {"not JSON": 1}
    steps = sorted(set(run.metrics.get_column("step")))
    assert steps == [e["step"] for e in entries if e["step"] != 5]


def test_state_with_no_usable_entry_names_the_file(tmp_path: Path) -> None:
    from logscope.exceptions import IngestError

    empty = tmp_path / "trainer_state.json"
    empty.write_text('{"global_step": 0, "log_history": []}')
    with pytest.raises(IngestError, match=r"trainer_state\.json"):
        load(empty)


# ---- the printed log ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("folder", "how", "rel"),
    [(HEALTHY, "progress bar", 5e-4), (TRUNCATED, "counted", 0.0)],
)
def test_printed_dicts_equal_trainer_state(folder: Path, how: str, rel: float) -> None:
    """Same steps, keys and values; transformers 5 prints .4g, transformers 4 full floats."""
    state = _values(hf_trainer_state.read(folder)[0])
    (log,) = load(folder / "train.log")
    assert log.source.kind == KIND_LOG and log.meta["framework"] == "trl"
    printed = _values(log)
    train_steps = {s for s, m in state if m == "loss"}
    assert {s for s, m in printed if m == "loss"} == train_steps
    # total_flos is popped before printing; a run without save_state() has no summary entry
    common = {k for k in state if k[1] != "total_flos"}
    assert common <= printed.keys()
    assert {m for _, m in printed.keys() - common} <= {
        "train_runtime",
        "train_loss",
        "train_samples_per_second",
        "train_steps_per_second",
    }
    assert all(_same(printed[k], state[k], rel) for k in common)
    assert any(f" {how}" in note for note in log.parse_stats.notes)
    assert log.parse_stats.skipped_lines == 0


def test_steps_come_from_the_progress_bar_when_not_every_step_is_logged(tmp_path: Path) -> None:
    """As with logging_steps=2: the bar still counts every step, so the dicts keep theirs."""
    lines = _log_lines(HEALTHY / "train.log")
    train_rows = [i for i, line in enumerate(lines) if "{'loss'" in line]
    for i in train_rows[0::2]:  # the dicts of steps 1, 3, 5, ... (their bars stay)
        lines[i] = lines[i][: lines[i].index("{'loss'")]
    sparse = tmp_path / "train.log"
    sparse.write_bytes("\n".join(lines).encode())
    (run,) = load(sparse)
    state = _values(hf_trainer_state.read(HEALTHY)[0])
    printed = _values(run)
    assert {s for s, m in printed if m == "loss"} == set(range(2, 17, 2))
    assert all(_same(v, state[k], 5e-4) for k, v in printed.items() if k in state)


def test_a_resumed_run_appended_to_the_log_keeps_its_steps(tmp_path: Path) -> None:
    """Resumed from checkpoint-8: the bar goes back to 9/16 and the steps with it."""
    lines = _log_lines(HEALTHY / "train.log")
    train_rows = [i for i, line in enumerate(lines) if "{'loss'" in line]
    resumed = tmp_path / "train.log"
    resumed.write_bytes("\n".join(lines + lines[train_rows[8] : train_rows[-1] + 1]).encode())
    (run,) = load(resumed)
    assert {s for s, m in _values(run) if m == "loss"} == set(range(1, 17))
    assert any("went back from step 16 to 9" in n for n in run.parse_stats.notes)


def test_eval_dicts_take_the_step_of_the_training_dict_before_them() -> None:
    (log,) = load(HEALTHY / "train.log")
    eval_steps = sorted({s for s, m in _values(log) if m == "eval_reward"})
    assert eval_steps == [
        e["step"] for e in _entries(HEALTHY / "trainer_state.json") if "eval_reward" in e
    ]


def test_garbled_and_cut_off_dict_lines_are_counted_and_steps_kept(tmp_path: Path) -> None:
    lines = _log_lines(TRUNCATED / "train.log")
    dict_rows = [i for i, line in enumerate(lines) if line.startswith("{'loss'")]
    fifth = dict_rows[4]
    lines[fifth] = lines[fifth][: len(lines[fifth]) // 2]  # cut mid-dict (a killed writer)
    lines[dict_rows[7]] = lines[dict_rows[7]].replace(": ", ": ))", 1)  # garbled
    lines[dict_rows[1]] += "\n{'prompt': 'a user print, cut"  # not the Trainer's: not counted
    damaged = tmp_path / "train.log"
    damaged.write_bytes("\n".join(lines).encode())
    (run,) = load(damaged)
    assert run.parse_stats.skipped_lines == 2
    assert [n for n, _ in run.parse_stats.skipped_examples] == [fifth + 2, dict_rows[7] + 2]
    state = _values(hf_trainer_state.read(TRUNCATED)[0])
    printed = _values(run)
    assert {s for s, m in printed if m == "loss"} == set(range(1, 13)) - {5, 8}
    assert all(_same(v, state[k], 0.0) for k, v in printed.items() if k in state)


def test_gzipped_log_reads_the_same(tmp_path: Path) -> None:
    packed = tmp_path / "train.log.gz"
    packed.write_bytes(gzip.compress((HEALTHY / "train.log").read_bytes()))
    (run,) = load(packed)
    assert run.source.kind == KIND_LOG
    assert _values(run) == _values(load(HEALTHY / "train.log")[0])


def test_printed_values_nan_inf_numpy_and_strings() -> None:
    text = (
        "{'loss': nan, 'grad_norm': inf, 'kl': -inf, 'reward': np.float64(0.5), "
        "'entropy': tensor(1.25), 'learning_rate': '1e-06', 'x': 'n/a', 'y': None, 'epoch': 1}"
    )
    parsed = hf_trainer_log.parse_dict(text)
    assert parsed is not None
    assert math.isnan(parsed["loss"]) and math.isnan(parsed["y"])
    assert parsed["grad_norm"] == math.inf and parsed["kl"] == -math.inf
    assert (parsed["reward"], parsed["entropy"], parsed["learning_rate"]) == (0.5, 1.25, 1e-06)
    assert "x" not in parsed and parsed["epoch"] == 1.0
    assert hf_trainer_log.parse_dict("{'loss': 0.1, 'grad") is None


@pytest.mark.parametrize("folder", [HEALTHY, TRUNCATED])
def test_fast_dict_parser_agrees_with_pythons(folder: Path) -> None:
    texts = [line[line.index("{'") :] for line in _log_lines(folder / "train.log") if "{'" in line]
    assert len(texts) > 12
    for text in texts:
        fast = hf_trainer_log.flat_dict(text.strip())
        assert fast is not None and fast == hf_trainer_log.literal_dict(text.strip())


def test_dicts_without_an_hf_key_or_beside_verl_step_lines_are_not_claimed(tmp_path: Path) -> None:
    hf = (TRUNCATED / "train.log").read_text()
    verl_too = tmp_path / "mixed.log"
    verl_too.write_text(hf + "step:3 - actor/pg_loss:0.012 - actor/entropy:1.2\n")
    config = tmp_path / "config.log"
    config.write_text("{'actor_rollout_ref': {'actor': {'optim': {'lr': 1e-06}}}, 'trainer': {}}\n")
    assert hf_trainer_log.sniff(TRUNCATED / "train.log")
    assert not hf_trainer_log.sniff(verl_too)
    assert not hf_trainer_log.sniff(config)


def test_every_other_fixture_and_real_log_keeps_its_reader() -> None:
    paths = [p for p in (ROOT / "fixtures").rglob("*") if p.is_file() and TRL not in p.parents]
    assert len(paths) > 50
    for path in paths + REAL_LOGS:
        kinds = {r.source.kind for r in load(path)}
        assert not kinds & HF_KINDS, path


# ---- TensorBoard (the existing reader) --------------------------------------------------------


@pytest.mark.parametrize("folder", [HEALTHY, TRUNCATED])
def test_tensorboard_file_has_the_same_values_under_train_keys(folder: Path) -> None:
    state = _values(hf_trainer_state.read(folder)[0])
    (tb,) = load(folder / "runs")
    assert tb.source.kind == "tensorboard" and tb.meta["framework"] == "trl"
    events = _values(tb)
    for (step, key), value in state.items():
        assert _same(events[(step, _tb_key(key))], value, 1e-6), (step, key)  # float32
    config = tb.config_segments[0].config  # the GRPOConfig, not the model's config.json
    assert config["max_completion_length"] == (3 if folder == TRUNCATED else 64)
    assert config["beta"] == 0.04 and "model_type" not in config


# ---- end to end ---------------------------------------------------------------------------


@pytest.mark.parametrize("folder", [HEALTHY, TRUNCATED])
def test_analyze_runs_end_to_end(folder: Path, tmp_path: Path) -> None:
    copy = tmp_path / folder.name
    shutil.copytree(folder, copy)
    result = CliRunner().invoke(
        app, ["analyze", str(copy), "--format", "json", "--store", str(tmp_path / "store")]
    )
    assert result.exit_code in (0, 1), result.output
    data = json.loads(result.stdout)
    reports = data.get("reports", [data])
    assert len(reports) == 3
    assert all(r["run"]["meta"]["framework"] == "trl" for r in reports)


def test_truncation_is_found_in_every_channel_of_the_truncated_run(tmp_path: Path) -> None:
    """The real pathology: max_completion_length=3 cuts most completions."""
    from logscope.analyze import analyze_paths

    for path in (
        TRUNCATED / "checkpoint-12" / "trainer_state.json",
        TRUNCATED / "train.log",
        TRUNCATED / "runs",
    ):
        (report,) = analyze_paths([path], store_dir=tmp_path, use_cache=False)
        assert "response-length-clipped" in {f.name for f in report.findings}, path
