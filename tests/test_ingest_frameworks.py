"""The console readers of ROLL, slime, SkyRL, prime-rl, NeMo-RL and AReaL, on the fixtures that
scripts/make_framework_fixtures.py writes as each framework prints: steps, exact values, the
framework in meta, damaged input, and that no other input changes reader."""

from __future__ import annotations

import gzip
import json
import math
import shutil
from pathlib import Path

import pytest

from logscope.exceptions import IngestError
from logscope.ingest import READER_MODULES, load, reader_modules
from logscope.model import Run

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
FW = FIXTURES / "frameworks"
# shared/ beside the checkout (a worktree under work/wt/ has it two levels up)
REAL_LOGS = next(
    (p / "shared" / "real_logs" for p in ROOT.parents if (p / "shared" / "real_logs").is_dir()),
    ROOT.parent / "shared" / "real_logs",
)

#: fixture → (reader kind, framework, steps read)
CASES = {
    "roll/roll_rlvr.log": ("roll-console", "roll", list(range(40))),
    "slime/slime_grpo.log": ("slime-console", "slime", list(range(40))),
    "skyrl/skyrl_grpo.log": ("skyrl-console", "skyrl", list(range(1, 41))),
    "prime_rl/run/logs/attempt_1/trainer.log": (
        "prime-rl-console",
        "prime-rl",
        list(range(1, 31)),
    ),
    "prime_rl/run/metrics.jsonl": ("prime-rl-jsonl", "prime-rl", list(range(1, 31))),
    "nemo_rl/nemo_grpo.log": ("nemo-rl-console", "nemo-rl", list(range(31))),
    "areal/areal_gsm8k.log": ("areal-console", "areal", list(range(23))),
}
FRAMEWORK_KINDS = {kind for kind, _, _ in CASES.values()}


def _one(path: Path, **kw) -> Run:
    (run,) = load(path, **kw)
    return run


def value(run: Run, metric: str, step: int) -> float:
    steps, values = run.series(metric)
    (at,) = [i for i, s in enumerate(steps) if s == step]
    return float(values[at])


def _lines(rel: str) -> list[str]:
    return (FW / rel).read_text(encoding="utf-8").split("\n")


# ---- every fixture: its reader, its framework, its steps -----------------------------------
@pytest.mark.parametrize("rel", sorted(CASES))
def test_fixture_goes_to_its_reader(rel: str) -> None:
    kind, framework, steps = CASES[rel]
    run = _one(FW / rel)
    assert run.source.kind == kind
    assert run.meta["framework"] == framework
    assert run.steps.tolist() == steps
    assert run.parse_stats.skipped_lines == 0


def test_readers_come_before_the_console_fallback() -> None:
    order = list(READER_MODULES)
    for name in ("roll", "slime", "skyrl", "prime_rl", "nemo_rl", "areal"):
        assert order.index(name) < order.index("console")
    assert order.index("prime_rl_jsonl") < order.index("tables")  # it has a step column too


def test_the_fixtures_are_small() -> None:
    for rel in CASES:
        assert (FW / rel).stat().st_size < 40_000, rel


# ---- no reader steals another's input ------------------------------------------------------
def _other_inputs() -> list[Path]:
    found = [p for p in FIXTURES.rglob("*") if p.is_file() and FW not in p.parents]
    return sorted(found) + sorted(REAL_LOGS.glob("*.log"))


def test_no_other_fixture_or_real_log_goes_to_a_framework_reader() -> None:
    inputs = _other_inputs()
    assert len(inputs) > 50 and any(p.parent == REAL_LOGS for p in inputs)
    sniffers = [m for m in reader_modules() if m.KIND in FRAMEWORK_KINDS]
    assert len(sniffers) == len(FRAMEWORK_KINDS)
    claimed = [(p.name, m.KIND) for p in inputs for m in sniffers if m.sniff(p)]
    assert claimed == []


@pytest.mark.parametrize("rel", sorted(CASES))
def test_only_its_own_reader_claims_a_fixture(rel: str) -> None:
    generic = ("verl-console", "table")  # text, and any JSONL with a step column
    claims = [m.KIND for m in reader_modules() if m.KIND not in generic and m.sniff(FW / rel)]
    assert claims == [CASES[rel][0]]


def test_jsonl_kinds_are_told_apart_by_their_keys(tmp_path: Path) -> None:
    verl = tmp_path / "verl.jsonl"
    verl.write_text('{"step": 1, "data": {"actor/entropy": 0.5}}\n')
    table = tmp_path / "table.jsonl"  # a step and a time column, but not prime-rl's
    table.write_text(
        '{"step": 1, "time": 0.5, "loss": 0.1}\n{"step": 2, "time": 1.0, "loss": 0.2}\n'
    )
    prime = tmp_path / "metrics.jsonl"
    prime.write_text('{"step": 1, "time": 1785571296.0, "perf/mfu": 40.1}\n')
    assert [_one(p).source.kind for p in (verl, table, prime)] == [
        "verl-jsonl",
        "table",
        "prime-rl-jsonl",
    ]


def test_a_marker_past_the_sniffed_head_is_not_looked_for(tmp_path: Path) -> None:
    lines = _lines("roll/roll_rlvr.log")
    log = tmp_path / "late.log"
    log.write_text(("filler line of a long startup\n" * 40_000) + "\n".join(lines))
    assert log.stat().st_size > 1 << 20
    assert _one(log).source.kind == "verl-console"
    assert _one(log, source="roll-console").n_steps == 40


# ---- exact values, framework by framework ----------------------------------------------------
def test_roll_keeps_every_key_and_value_of_each_json_line() -> None:
    run = _one(FW / "roll/roll_rlvr.log")
    records = [
        json.loads(line.split("metrics_tag: ", 1)[1])
        for line in _lines("roll/roll_rlvr.log")
        if "metrics_tag: " in line
    ]
    assert len(records) == 40
    for record in records:
        for key, expected in record["metrics"].items():
            got = value(run, key, record["step"])
            assert got == expected or (math.isnan(got) and math.isnan(expected))
    assert math.isnan(value(run, "actor_train/grad_norm", 23))
    assert [e.kind for e in run.events] == ["grad-norm-not-finite"]


def test_slime_puts_rollout_ids_on_the_train_step_axis() -> None:
    run = _one(FW / "slime/slime_grpo.log")
    assert run.meta["steps_per_rollout"] == 2
    assert any("R x 2" in note for note in run.parse_stats.notes)
    # `rollout 7: {'rollout/raw_reward': 0.39148957541174023` → train step 14
    assert value(run, "rollout/raw_reward", 14) == 0.39148957541174023
    assert run.series("rollout/raw_reward")[0].tolist() == list(range(0, 40, 2))
    assert value(run, "eval/gsm8k", 8) == 0.382025262041034  # `eval 4`
    # train lines stay where slime printed them: `step 23: {... 'train/grad_norm': nan`
    assert math.isnan(value(run, "train/grad_norm", 23))
    assert value(run, "train/step", 23) == 23.0
    assert value(run, "train/loss", 23) == 0.01941926382754857


def test_slime_one_train_step_per_rollout_maps_one_to_one(tmp_path: Path) -> None:
    log = tmp_path / "sync.log"
    rows = []
    for r in range(4):
        rows.append(f"[2026-08-01 08:00:0{r}] train_metric_utils.py:135 - rollout {r}: ")
        rows[-1] += str({"rollout/raw_reward": r / 10})
        rows.append(f"[2026-08-01 08:00:0{r}] model.py:918 - step {r}: ")
        rows[-1] += str({"train/loss": float("nan") if r == 2 else 0.5, "train/step": r})
    log.write_text("\n".join(rows) + "\n")
    run = _one(log)
    assert run.meta["steps_per_rollout"] == 1
    assert run.series("rollout/raw_reward")[1].tolist() == [0.0, 0.1, 0.2, 0.3]
    assert math.isnan(value(run, "train/loss", 2))


def test_skyrl_reads_the_pprint_blocks_and_their_string_floats() -> None:
    run = _one(FW / "skyrl/skyrl_grpo.log")
    assert value(run, "policy/final_loss", 24) == 0.0069  # `'policy/final_loss': '0.0069'`
    assert math.isnan(value(run, "policy/grad_norm", 24))  # `'policy/grad_norm': 'nan'`
    steps, global_step = run.series("trainer/global_step")
    assert global_step.tolist() == steps.tolist()  # the int key, as printed
    assert len(run.metric_names) == 15


def test_prime_rl_console_maps_each_field_to_its_wandb_key() -> None:
    run = _one(FW / "prime_rl/run/logs/attempt_1/trainer.log")
    # `Step 12 |  1m 36s | Loss -0.0029 | Entropy 0.5265 | Mismatch KL 0.0010 | Grad. Norm 0.2027
    #  | LR 1.00e-06 | Throughput 16476 tokens/s | MFU 40.1% | Peak Mem. 61.6 GiB`
    expected = {
        "loss/mean": -0.0029,
        "entropy/all/mean": 0.5265,
        "mismatch_kl/all/mean": 0.0010,
        "optim/grad_norm": 0.2027,
        "optim/lr": 1e-06,
        "perf/throughput": 16476.0,
        "perf/mfu": 40.1,
        "perf/peak_memory": 61.6,
        "time/step": 96.0,
    }
    assert {k: value(run, k, 12) for k in expected} == expected
    assert all(math.isnan(value(run, k, 21)) for k in ("loss/mean", "optim/grad_norm"))
    # step 26: eight tensor stats dropped from the JSONL, five named in the warning
    assert math.isnan(value(run, "entropy/all/max", 26))
    assert not run.has_metric("is_masked_high/all/mean")
    assert any("3 dropped non-finite" in note for note in run.parse_stats.notes)


def test_prime_rl_jsonl_merges_rows_and_restores_nan_from_the_logs_beside_it() -> None:
    run = _one(FW / "prime_rl/run/metrics.jsonl")
    rows = [json.loads(line) for line in _lines("prime_rl/run/metrics.jsonl") if line]
    at_21 = {k: v for r in rows if r["step"] == 21 for k, v in r.items()}
    assert value(run, "perf/mfu", 21) == at_21["perf/mfu"]
    assert "optim/grad_norm" not in at_21 and "loss/mean" not in at_21
    # trainer.log warns after `Step 21`; orchestrator.log before its `Step 12`
    assert math.isnan(value(run, "optim/grad_norm", 21))
    assert math.isnan(value(run, "loss/mean", 21))
    assert math.isnan(value(run, "train/agg/effective/default/reward/mean", 12))
    assert math.isnan(value(run, "entropy/all/max", 26))
    walls = run.metrics.filter(run.metrics["metric"] == "perf/mfu")["wall_time"].to_list()
    assert walls[0] == next(r["time"] for r in rows if "perf/mfu" in r)


def test_prime_rl_jsonl_alone_says_nan_may_be_missing(tmp_path: Path) -> None:
    alone = tmp_path / "metrics.jsonl"
    shutil.copy(FW / "prime_rl/run/metrics.jsonl", alone)
    run = _one(alone)
    assert "optim/grad_norm" not in run.metrics.filter(run.metrics["step"] == 21)["metric"]
    assert any("may have been non-finite" in note for note in run.parse_stats.notes)


def test_nemo_rl_bullets_reach_their_logged_keys_across_epochs() -> None:
    run = _one(FW / "nemo_rl/nemo_grpo.log")
    # epoch 2's `Step 1/15` is W&B step 16; `  • Loss: nan` is total step 17
    assert math.isnan(value(run, "train/loss", 17))
    assert value(run, "timing/train/generation", 1) == 58.38  # `  • generation: 58.38s (59.6%)`
    assert value(run, "timing/train/total_step_time", 1) == 97.91
    assert value(run, "performance/train_flops_per_gpu", 1) == 101.55  # per rank
    assert value(run, "performance/train_fp_utilization", 1) == pytest.approx(0.4107)
    assert run.series("validation/accuracy")[0].tolist() == [0, 10, 20, 30]
    assert value(run, "validation/accuracy", 0) == 0.2
    assert run.parse_stats.step_lines == 30


def test_areal_reads_column_major_tables_at_their_wandb_steps() -> None:
    run = _one(FW / "areal/areal_gsm8k.log")
    # `Train step 11/22` commits two dicts: W&B steps 10 and 11; `Train step 12/22` is step 12
    assert value(run, "ppo_actor/task_reward/avg", 10) == 0.41901
    assert value(run, "ppo_actor/task_reward/avg", 11) == pytest.approx(0.42901, abs=1e-4)
    assert value(run, "ppo_actor/task_reward/avg", 12) == 0.48322
    assert value(run, "ppo_actor/update/approx_kl/avg", 12) == 2.0970e-04
    assert math.isnan(value(run, "ppo_actor/update/grad_norm", 19))
    assert len(run.metric_names) == 5  # the short last row's empty cells are no keys


# ---- damaged input ---------------------------------------------------------------------------
#: fixture → a substring of a record line to cut in half
CUT = {
    "roll/roll_rlvr.log": 'metrics_tag: {"step": 5,',
    "slime/slime_grpo.log": "step 5: {",
    "skyrl/skyrl_grpo.log": " 'policy/policy_kl'",
    "prime_rl/run/logs/attempt_1/trainer.log": "Step 5 |",
    "prime_rl/run/metrics.jsonl": '{"step": 5,',
    "areal/areal_gsm8k.log": "│ ppo_actor/update/entropy/avg",
    "nemo_rl/nemo_grpo.log": "  • Avg Reward:",
}


@pytest.mark.parametrize("rel", sorted(CUT))
def test_a_cut_line_and_garbage_are_counted_and_the_rest_is_read(rel: str, tmp_path: Path) -> None:
    kind, _, steps = CASES[rel]
    lines = _lines(rel)
    at = next(i for i, line in enumerate(lines) if CUT[rel] in line)
    if rel.startswith("skyrl"):  # a block cut off: the rest of the dict is gone
        end = next(i for i in range(at, len(lines)) if lines[i].endswith("}"))
        del lines[at : end + 1]
    elif rel.startswith("nemo"):  # a bullet whose number is garbled
        lines[at] = "  • Avg Reward: 0.2x"
    else:
        lines[at] = lines[at][: len(lines[at]) // 2]
    lines.insert(at + 1, "\x00\x07 garbage ~~~ {'oops")
    damaged = tmp_path / rel.replace("/", "_")
    damaged.write_text("\n".join(lines), encoding="utf-8")
    if rel.startswith("prime_rl/run/metrics"):
        damaged = damaged.rename(tmp_path / "metrics.jsonl")
    run = _one(damaged, source=kind)
    assert run.parse_stats.skipped_lines >= 1
    assert run.parse_stats.skipped_examples
    assert len(run.steps) >= len(steps) - 1


@pytest.mark.parametrize("rel", sorted(CASES))
def test_gzipped_logs_read_the_same(rel: str, tmp_path: Path) -> None:
    shutil.copytree(FW / "prime_rl/run/logs", tmp_path / "logs")  # what metrics.jsonl reads too
    packed = tmp_path / (Path(rel).name + ".gz")
    packed.write_bytes(gzip.compress((FW / rel).read_bytes()))
    assert _one(packed).source.kind == CASES[rel][0]
    assert _one(packed).metrics.equals(_one(FW / rel).metrics)


@pytest.mark.parametrize("kind", sorted(FRAMEWORK_KINDS))
def test_forcing_a_reader_on_foreign_text_names_the_file(kind: str) -> None:
    path = FIXTURES / "verl_tuned.log"
    with pytest.raises(IngestError, match=r"verl_tuned\.log"):
        load(path, source=kind)


def test_skyrl_blocks_behind_ray_prefixes_and_colors_read_the_same(tmp_path: Path) -> None:
    # Ray workers log through loguru with colorize=True (skyrl/train/utils/utils.py:864-875)
    # and Ray puts its prefix before every line, the pprint lines included
    colored = []
    for line in _lines("skyrl/skyrl_grpo.log"):
        if " - Step " in line:
            line = line.replace("INFO    ", "\x1b[1m\x1b[32mINFO    \x1b[0m") + "\x1b[0m"
        colored.append(f"(skyrl_entrypoint pid=77) {line}" if line else line)
    log = tmp_path / "ray.log"
    log.write_text("\n".join(colored), encoding="utf-8")
    assert _one(log).metrics.equals(_one(FW / "skyrl/skyrl_grpo.log").metrics)


def test_printed_dicts_of_numpy_torch_nan_and_nested_values() -> None:
    from logscope.ingest._framework import parse_dict_repr

    text = "{'a': np.float64(0.5), 'b': nan, 'c': tensor(0.25, device='cuda:0'), 'd': -inf}"
    got = parse_dict_repr(text)
    assert got is not None and got["a"] == 0.5 and got["c"] == 0.25 and got["d"] == -math.inf
    assert math.isnan(got["b"])
    assert parse_dict_repr("{'x': {'y': 1.5}, 'label': 'text', 'ok': True}") == {
        "x/y": 1.5,
        "ok": 1.0,
    }
    assert parse_dict_repr("{'x': 1.5, 'y") is None


def test_areal_merged_log_with_role_prefixes_and_colors_reads_the_same(tmp_path: Path) -> None:
    # merged.log: `sed 's/^/[trainer] /'` on every line (areal/infra/utils/proc.py:81) of the
    # colored LOG_FORMAT (areal/utils/logging.py:18), a rollout worker's line in between
    header = "\x1b[1;38;2;180;140;80m(AReaL)\x1b[0m \x1b[37m"
    merged = []
    for line in _lines("areal/areal_gsm8k.log"):
        line = line.replace("(AReaL) ", header)
        merged.append(f"[trainer] {line}\x1b[0m" if line else line)
        if line.startswith("│"):
            merged.append("[rollout] (AReaL) 20260801-08:00:00.000 RLVRWorkflow INFO: done")
    log = tmp_path / "merged.log"
    log.write_text("\n".join(merged), encoding="utf-8")
    assert _one(log).metrics.equals(_one(FW / "areal/areal_gsm8k.log").metrics)


def test_a_truncated_gz_is_read_as_far_as_it_decodes(tmp_path: Path) -> None:
    packed = gzip.compress((FW / "roll/roll_rlvr.log").read_bytes())
    cut = tmp_path / "roll.log.gz"
    cut.write_bytes(packed[: len(packed) * 2 // 3])
    run = _one(cut, source="roll-console")
    assert 10 < run.n_steps < 40
    assert any(".gz file ends early" in note for note in run.parse_stats.notes)


def test_nemo_rl_ppo_and_async_grpo_bullets(tmp_path: Path) -> None:
    # nemo_rl/algorithms/ppo.py:1928-1942 prints values unformatted, 'N/A' when absent;
    # async GRPO (grpo.py:5323-5330) adds the replay buffer's size and trajectory age
    log = tmp_path / "ppo.log"
    log.write_text(
        f"\n{'=' * 25} Step 1/5 {'=' * 25}\n\n📊 Training Results:\n"
        "  • Policy Loss: 0.123456789\n  • Generation KL Error: N/A\n"
        "  • Critic Loss: 1.5\n  • Critic LR: 5.00e-06\n  • Buffer Size: 64\n"
        "  • Avg Trajectory Age: 0.50 steps\n  • Avg Reward: nan\n",
        encoding="utf-8",
    )
    run = _one(log)
    assert {
        k: value(run, k, 1) for k in ("train/loss", "train/critic/loss", "train/critic/lr")
    } == {
        "train/loss": 0.123456789,
        "train/critic/loss": 1.5,
        "train/critic/lr": 5e-06,
    }
    assert value(run, "train/buffer_size", 1) == 64.0
    assert value(run, "train/avg_trajectory_age", 1) == 0.5
    assert math.isnan(value(run, "train/reward", 1))
    assert not run.has_metric("train/gen_kl_error")
    assert run.parse_stats.skipped_lines == 0
