"""Write fixtures/frameworks/: console logs (and prime-rl's metrics.jsonl) of ROLL, slime, SkyRL,
prime-rl, NeMo-RL and AReaL, as each framework prints them.

None of them runs here (GPU, Ray, Megatron), so each writer follows the framework's printing
code line for line (file and line named at each writer; snapshots of 2026-08: ROLL 8eb27cc,
slime 624b824, SkyRL a956457, prime-rl 559b447, NeMo-RL 7ea279a, AReaL 4aef98d). Where the
printing is a library call it is that library: `json.dumps` (ROLL), `str(dict)` (slime),
`pprint.pformat` (SkyRL), `tabulate` (AReaL: `pip install tabulate`; the fixtures are committed,
so only this script needs it). The values are one seeded healthy-looking run with a few
non-finite values, the same for every framework.

    python scripts/make_framework_fixtures.py          # (re)write the fixtures
    python scripts/make_framework_fixtures.py --check  # exit 1 when a fixture is stale
    pip download --no-deps areal==1.0.4 -d /tmp/w      # AReaL's own table printer:
    python scripts/make_framework_fixtures.py --check --areal-wheel /tmp/w/areal-1.0.4-py3-none-any.whl

Made with tabulate 0.10.0 and numpy's default_rng (seeded).
"""

from __future__ import annotations

import argparse
import json
import math
import pprint
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "fixtures" / "frameworks"
NAN = float("nan")
START = 1_785_571_200  # 2026-08-01 08:00:00 UTC


def curves(n: int, seed: int) -> list[dict[str, float]]:
    """n steps of one GRPO-like run: reward up, entropy down, small KL, a few spikes."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        t = i / max(1, n - 1)
        out.append(
            {
                "reward": float(0.25 + 0.45 * t + rng.normal(0, 0.03)),
                "entropy": float(0.62 - 0.25 * t + rng.normal(0, 0.01)),
                "kl": float(max(0.0, 0.001 + 0.004 * t + rng.normal(0, 0.0005))),
                "ppo_kl": float(abs(rng.normal(0.0008, 0.0003))),
                "clip": float(abs(rng.normal(0.002, 0.001))),
                "loss": float(rng.normal(0.0, 0.02)),
                "grad_norm": float(abs(rng.normal(0.35, 0.08))),
                "length": float(480 + 220 * t + rng.normal(0, 20)),
                "truncated": float(max(0.0, 0.01 + 0.02 * t + rng.normal(0, 0.005))),
                "mismatch": float(abs(rng.normal(0.0012, 0.0003))),
                "time": float(95 + rng.normal(0, 4)),
                "gen_time": float(60 + rng.normal(0, 3)),
                "memory": float(61.5 + rng.normal(0, 0.4)),
                "tps": float(2100 + rng.normal(0, 60)),
            }
        )
    return out


def clock(step: int, seconds: float = 96.0) -> tuple[str, str, str]:
    """(date-time, time of day, milliseconds) of a step's log lines."""
    import time

    at = START + step * seconds
    tm = time.gmtime(at)
    return (
        time.strftime("%Y-%m-%d %H:%M:%S", tm),
        time.strftime("%H:%M:%S", tm),
        f"{step * 37 % 1000:03d}",
    )


# ---- ROLL -------------------------------------------------------------------------------------
def roll() -> dict[str, str]:
    """roll/utils/logging.py:57 (format) and roll/utils/tracking.py:161 (StdoutTracker.log):
    `logger.info(f"metrics_tag: {json.dumps({'step': step, 'metrics': values})}")`, keys as
    rlvr_pipeline.py:822 logs them, reducer tags stripped (tracking.py:15-37)."""

    def line(step: int, file: str, lineno: int, message: str) -> str:
        when = clock(step)[0]
        return f"[{when}] [{file} ({lineno})] [INFO] [DRIVER 0 / 1][PID 4242] {message}"

    out = [
        line(0, "tracking.py", 170, "create tracker stdout, kwargs: {}"),
        line(0, "rlvr_pipeline.py", 561, "pipeline start, global_step: 0"),
    ]
    for step, c in enumerate(curves(40, seed=11)):
        grad = NAN if step == 23 else c["grad_norm"]
        if step == 23:
            out.append(
                line(step, "fsdp2_strategy.py", 1598, "WARN: rank 0 grad_norm is not finite")
            )
        metrics = {
            "critic/score/mean": c["reward"],
            "critic/rewards/mean": c["reward"],
            "critic/advantages/mean": 0.0,
            "actor/pg_loss": c["loss"],
            "actor/kl_loss": c["kl"],
            "actor/approxkl": c["ppo_kl"],
            "actor/clipfrac": c["clip"],
            "actor/ppo_ratio_high_clipfrac": c["clip"] / 2,
            "actor/lr": 1e-06,
            "actor_train/grad_norm": grad,
            "critic/entropy/mean": c["entropy"],
            "token/response_length/mean": c["length"],
            "token/total_response_length/clip": c["truncated"],
            "system/max_memory_allocated": c["memory"],
            "system/tps_gpu": c["tps"],
            "time/step_total": c["time"],
        }
        out.append(
            line(
                step,
                "tracking.py",
                161,
                f"metrics_tag: {json.dumps({'step': step, 'metrics': metrics})}",
            )
        )
    return {"roll/roll_rlvr.log": "\n".join(out) + "\n"}


# ---- slime ------------------------------------------------------------------------------------
def slime() -> dict[str, str]:
    """observability/logging_utils.py:20 (format `[%(asctime)s] %(filename)s:%(lineno)d - …`);
    rollout_metrics.py:268 (`perf R` of the RolloutManager), train_metric_utils.py:135
    (`rollout R`), megatron_utils/model.py:918 (`step S`, S = R × k + step_id, model.py:879),
    train_metric_utils.py:401 (`perf R` of the trainer), rollout_metrics.py:247 (`eval R`).
    Two train steps per rollout (k = 2: `--num-steps-per-rollout 2`)."""
    k = 2
    c = curves(40, seed=12)
    out = []

    def log(actor: str, step: int, where: str, message: str) -> None:
        out.append(f"({actor}) [{clock(step)[0]}] {where} - {message}")

    for rollout_id in range(20):
        r = c[rollout_id * k]
        log(
            "RolloutManager pid=1805",
            rollout_id * k,
            "rollout_metrics.py:268",
            f"perf {rollout_id}: "
            + str(
                {
                    "rollout/response_len/mean": r["length"],
                    "rollout/response_len/max": 4096,
                    "rollout/zero_std/count_0": 3 + rollout_id % 4,
                    "rollout/truncated_ratio": r["truncated"],
                    "perf/rollout_time": r["gen_time"],
                    "perf/tokens_per_gpu_per_sec": r["tps"],
                }
            ),
        )
        log(
            "MegatronTrainRayActor pid=1900",
            rollout_id * k,
            "train_metric_utils.py:135",
            f"rollout {rollout_id}: "
            + str(
                {
                    "rollout/raw_reward": r["reward"],
                    "rollout/rewards": 0.0,
                    "rollout/log_probs": -r["entropy"],
                    "rollout/advantages": 0.0,
                }
            ),
        )
        for step_id in range(k):
            step = rollout_id * k + step_id
            s = c[step]
            log_dict = {
                "train/loss": s["loss"],
                "train/pg_loss": s["loss"],
                "train/entropy_loss": s["entropy"],
                "train/pg_clipfrac": s["clip"],
                "train/ppo_kl": s["ppo_kl"],
                "train/kl_loss": s["kl"],
                "train/train_rollout_logprob_abs_diff": s["mismatch"],
                "train/grad_norm": NAN if step == 23 else s["grad_norm"],
                "train/lr-pg_0": 1e-06,
                "train/global_batch_size": 128,
                "train/step": step,
            }
            log("MegatronTrainRayActor pid=1900", step, "model.py:918", f"step {step}: {log_dict}")
        log(
            "MegatronTrainRayActor pid=1900",
            rollout_id * k + 1,
            "train_metric_utils.py:401",
            f"perf {rollout_id}: "
            + str({"perf/actor_train_time": r["time"] / 2, "perf/step_time": r["time"]}),
        )
        if rollout_id % 5 == 4:
            log(
                "RolloutManager pid=1805",
                rollout_id * k + 1,
                "rollout_metrics.py:247",
                f"eval {rollout_id}: "
                + str({"eval/gsm8k": r["reward"] + 0.05, "eval/gsm8k-truncated_ratio": 0.0}),
            )
    return {"slime/slime_grpo.log": "\n".join(out) + "\n"}


# ---- SkyRL ------------------------------------------------------------------------------------
def _stringify_floats(obj: object) -> object:
    """skyrl/train/utils/tracking.py:194-204 (ConsoleLogger.stringify_floats), verbatim."""
    if isinstance(obj, float):
        return f"{obj:.4f}"
    elif isinstance(obj, dict):
        return {k: _stringify_floats(v) for k, v in obj.items()}
    elif isinstance(obj, list):
        return [_stringify_floats(v) for v in obj]
    elif isinstance(obj, tuple):
        return tuple(_stringify_floats(v) for v in obj)
    return obj


def skyrl() -> dict[str, str]:
    """skyrl/train/utils/tracking.py:186-189 (`logger.info(f"Step {step}: \\n{pprint.pformat(…)}")`)
    with loguru's format of skyrl/train/utils/utils.py:864-875; keys of trainer.py:525-538."""

    def loguru(step: int, where: str, message: str) -> str:
        day, _, ms = clock(step)
        return f"{day}.{ms} | INFO     | {where} - {message}"

    out = [loguru(0, "skyrl.train.trainer:train:402", "Started: 'step'")]
    for i, c in enumerate(curves(40, seed=13)):
        step = i + 1
        data = {
            "policy/final_loss": c["loss"],
            "policy/policy_loss": c["loss"],
            "policy/policy_entropy": c["entropy"],
            "policy/policy_kl": c["kl"],
            "policy/loss_metrics/clip_ratio": c["clip"],
            "policy/grad_norm": NAN if step == 24 else c["grad_norm"],
            "policy/policy_lr": 1e-06,
            "policy/rollout_train_logprobs_abs_diff_mean": c["mismatch"],
            "reward/avg_raw_reward": c["reward"],
            "reward/avg_pass_at_8": min(1.0, c["reward"] + 0.2),
            "generate/avg_num_tokens": c["length"],
            "trainer/tokens_per_second_per_gpu": c["tps"],
            "trainer/epoch": 0,
            "trainer/global_step": step,
            "timing/step": c["time"],
        }
        out.append(
            loguru(
                step,
                "skyrl.train.trainer:train:401",
                f"Finished: 'step', time cost: {c['time']:.2f}s",
            )
        )
        out.append(
            loguru(step, "skyrl.train.utils.tracking:log:189", f"Step {step}: \n")
            + pprint.pformat(_stringify_floats(data))
        )
    return {"skyrl/skyrl_grpo.log": "\n".join(out) + "\n"}


# ---- prime-rl ---------------------------------------------------------------------------------
def _format_time(seconds: float) -> str:
    """src/prime_rl/utils/logger.py:253-275 (format_time), verbatim."""
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.1f}s"
    if seconds < 3600:
        m, s = divmod(seconds, 60)
        return f"{int(m)}m {int(s)}s"
    if seconds < 86400:
        h, rem = divmod(seconds, 3600)
        m = rem // 60
        return f"{int(h)}h {int(m)}m"
    d, rem = divmod(seconds, 86400)
    h = rem // 3600
    return f"{int(d)}d {int(h)}h"


def _sanitize(metrics: dict[str, float]) -> tuple[dict[str, float], list[str]]:
    """src/prime_rl/utils/utils.py:130 (sanitize) for a flat dict."""
    kept = {k: v for k, v in metrics.items() if not (isinstance(v, float) and not math.isfinite(v))}
    return kept, [k for k in metrics if k not in kept]


def prime_rl() -> dict[str, str]:
    """Trainer: src/prime_rl/trainer/rl/train.py:636-688 (the step line, then its monitors.log
    calls; the disk metrics of :690 left out); orchestrator: orchestrator/orchestrator.py:747
    (monitors.log) then :880 (its step line); FileMonitor.log_metrics (monitors/file.py):
    sanitize, warn, one JSON row per call, in `<run>/metrics.jsonl`; loguru format of
    utils/logger.py:108-163 (colorized)."""
    rows: list[str] = []
    trainer: list[str] = []
    orchestrator: list[str] = []
    dim, green, yellow, reset, no_bold = (
        "\x1b[2m",
        "\x1b[1m\x1b[32m",
        "\x1b[1m\x1b[33m",
        "\x1b[0m",
        "\x1b[22m",
    )

    def loguru(lines: list[str], step: int, level: str, message: str) -> None:
        color = green if level == "SUCCESS" else yellow
        # torchrun --role=trainer --tee=3 (entrypoints/rl.py:320-330) prefixes `[trainer0]:`
        tee = "[trainer0]:" if lines is trainer else ""
        lines.append(
            f"{tee}{dim}{clock(step)[1]}{reset} {color}{level: >7}{reset} "
            f"{color}{no_bold}{message}{reset}{reset}"
        )

    def monitor(lines: list[str], step: int, metrics: dict[str, float]) -> None:
        kept, dropped = _sanitize(metrics)
        if dropped:
            loguru(
                lines,
                step,
                "WARNING",
                f"Dropping {len(dropped)} non-finite value(s) from metrics.jsonl: {', '.join(dropped[:5])}",
            )
        rows.append(
            json.dumps({"step": step, "time": START + step * 96.0 + len(rows) % 7 * 0.01, **kept})
        )

    for i, c in enumerate(curves(30, seed=14)):
        step = i + 1
        bad = step == 21  # a NaN loss: loss, entropy and grad norm go non-finite together
        worse = step == 26  # every tensor stat non-finite: more than the warning names
        reward = NAN if step == 12 else c["reward"]
        orch = {
            "train/agg/effective/default/reward/mean": reward,
            "train/agg/effective/default/num_output_tokens/mean": c["length"],
            "train/agg/effective/default/is_truncated/mean": c["truncated"],
            "progress/total_tokens": 40_000.0 * step,
            "off_policy/mean": 0.5,
            "step": step,
        }
        monitor(orchestrator, step, orch)
        loguru(
            orchestrator,
            step,
            "SUCCESS",
            f"Step {step} | {_format_time(c['gen_time']):>7} | Reward {reward:.4f} | Trainable 62/64 (96.9%) | "
            f"Turns 1.0 | Branches 1.0 | Max Off-Policy 1 | Error 0.0% | Cancelled 0.0% | "
            f"Truncation {c['truncated']:.1%}",
        )
        tensor = {
            "loss/mean": NAN if bad or worse else c["loss"],
            "entropy/all/mean": NAN if bad or worse else c["entropy"],
            "entropy/all/max": NAN if worse else c["entropy"] * 4,
            "mismatch_kl/all/mean": NAN if worse else c["mismatch"],
            "mismatch_kl/all/max": NAN if worse else c["mismatch"] * 9,
            "is_masked/all/mean": NAN if worse else c["clip"],
            "is_masked_low/all/mean": NAN if worse else c["clip"] / 3,
            "is_masked_high/all/mean": NAN if worse else c["clip"] / 2,
        }
        grad = NAN if bad else c["grad_norm"]
        mfu, throughput = 38.0 + c["tps"] / 1000, c["tps"] * 8
        message = (
            f"Step {step} | {_format_time(c['time']):>7} | Loss {tensor['loss/mean']:.4f} | "
            f"Entropy {tensor['entropy/all/mean']:.4f}"
        )
        message += f" | Mismatch KL {tensor['mismatch_kl/all/mean']:.4f}"
        message += f" | Grad. Norm {grad:.4f}"
        message += f" | LR {1e-06:.2e} | Throughput {throughput:.0f} tokens/s | MFU {mfu:.1f}% | Peak Mem. {c['memory']:.1f} GiB"
        loguru(trainer, step, "SUCCESS", message)
        monitor(
            trainer,
            step,
            {
                "perf/throughput": throughput,
                "perf/mfu": mfu,
                "perf/peak_memory": c["memory"],
                "step": step,
            },
        )
        monitor(trainer, step, {"optim/lr": 1e-06, "optim/grad_norm": grad, "step": step})
        monitor(trainer, step, {**tensor, "step": step})
        monitor(
            trainer,
            step,
            {
                "time/step": c["time"],
                "time/wait_for_batch": 0.4,
                "time/forward_backward": c["time"] * 0.7,
                "step": step,
            },
        )
    return {
        "prime_rl/run/metrics.jsonl": "\n".join(rows) + "\n",
        "prime_rl/run/logs/attempt_1/trainer.log": "\n".join(trainer) + "\n",
        "prime_rl/run/logs/attempt_1/orchestrator.log": "\n".join(orchestrator) + "\n",
    }


# ---- NeMo-RL ----------------------------------------------------------------------------------
def nemo_rl() -> dict[str, str]:
    """nemo_rl/algorithms/grpo.py: epoch and step headers (:2803, :2819), `▶` stage lines,
    `📊 Training Results:` (:3703-3719), `⏱️  Timing:` (:3721-3745), validation (:3995-4005);
    algorithms/utils.py print_performance_metrics (:568, :825-850). Two epochs of 15 steps,
    validation every 10 steps and before the first."""
    out: list[str] = []

    def validation(accuracy: float) -> None:
        out.append("\n📊 Validation Results:")
        out.append(f"    • Accuracy: {accuracy:.4f}")
        out.append(f"    • Average response length: {512.3:.1f} tokens")
        out.append(f"    • Samples processed: {128}")
        out.append("\n  ⏱️  Validation Timing:")
        out.append(f"    • Total validation time: {31.25:.2f}s")

    out.append("🔍 Running initial validation...")
    validation(0.2)
    c = curves(30, seed=15)
    total_steps = 0
    for epoch in range(2):
        out.append(f"\n{'=' * 25} Epoch {epoch + 1}/2 {'=' * 25}")
        for current_step in range(15):
            s = c[total_steps]
            out.append(f"\n{'=' * 25} Step {current_step + 1}/15 {'=' * 25}")
            out.append("▶ Preparing batch...")
            out.append("▶ Generating responses for batch of size 256...")
            out.append("▶ Processing rewards...,")
            out.append("▶ Computing logprobs...")
            out.append("▶ Training policy...")
            if (total_steps + 1) % 10 == 0:
                out.append(f"▶ Starting validation at step {total_steps + 1}...")
                validation(s["reward"] + 0.05)
            loss = NAN if total_steps + 1 == 17 else s["loss"]
            out.append("\n📊 Training Results:")
            out.append(f"  • Loss: {loss:.4f}")
            out.append(f"  • Generation KL Error: {s['mismatch']:.4f}")
            out.append(f"  • Avg Reward: {s['reward']:.4f}")
            out.append(f"  • Mean Generation Length: {s['length']:.4f}")
            timings = {
                "total_step_time": s["time"],
                "generation": s["gen_time"],
                "policy_training": s["time"] - s["gen_time"] - 8.0,
                "policy_and_reference_logprobs": 6.0,
                "data_processing": 2.0,
            }
            out.append("\n⏱️  Timing:")
            total = timings["total_step_time"]
            out.append(f"  • Total step time: {total:.2f}s")
            for key, value in sorted(timings.items(), key=lambda item: item[1], reverse=True):
                if key != "total_step_time":
                    out.append(f"  • {key}: {value:.2f}s ({value / total * 100:.1f}%)")
            out.append("\n🔍 Performance Metrics:")
            out.append(f"  • Mean Total Tokens per Sample: {s['length'] + 180:.2f}")
            out.append("  • Throughputs (per GPU):")
            out.append(f"    - E2E (Samples/sec/gpu): {256 / total / 8:.2f}")
            out.append(f"    - E2E (Tokens/sec/gpu): {s['tps']:.2f}")
            out.append("  • Throughputs (per Group):")
            out.append(f"    - E2E (Tokens/sec): {s['tps'] * 8:.2f}")
            out.append(f"  • Training FLOPS: {812.4:.2f} TFLOPS ({812.4 / 8:.2f} TFLOPS per rank)")
            out.append(f"  • Training Model Floating Point Utilization: {41.07:.2f}%")
            total_steps += 1
    return {"nemo_rl/nemo_grpo.log": "\n".join(out) + "\n"}


# ---- AReaL ------------------------------------------------------------------------------------
def areal_printing(wheel: Path) -> Callable[..., str]:
    """AReaL's own `tabulate_stats`, from `areal/utils/printing.py` of a downloaded AReaL wheel
    (`pip download --no-deps areal`): the module imports only tabulate, so it runs here without
    the rest of AReaL (whose package imports need torch)."""
    import types
    import zipfile

    with zipfile.ZipFile(wheel) as z:
        source = z.read("areal/utils/printing.py").decode("utf-8")
    module = types.ModuleType("areal_utils_printing")
    exec(compile(source, f"{wheel}/areal/utils/printing.py", "exec"), module.__dict__)
    return module.tabulate_stats


def _tabulate_stats(data: dict[str, float], col: int = 4, floatfmt: str = ".4e") -> str:
    """areal/utils/printing.py (tabulate_stats), verbatim (the same bytes as areal 1.0.4's)."""
    from tabulate import tabulate

    items = list(data.items())
    row_count = (len(items) + col - 1) // col
    column_major = []
    for i in range(row_count):
        row = []
        for j in range(col):
            index = i + j * row_count
            if index < len(items):
                row.extend(items[index])
        column_major.append(row)
    return tabulate(column_major, floatfmt=floatfmt, tablefmt="fancy_grid")


TABULATE_STATS: Callable[..., str] = _tabulate_stats


def areal() -> dict[str, str]:
    """areal/utils/stats_logger.py:135-160 (commit: done line, `Stats (i/m):`, print_stats) with
    the plain file format of areal/utils/logging.py:19 (`(AReaL) %(asctime)s.%(msecs)03d
    %(name)s %(levelname)s: %(message)s`, dates `%Y%m%d-%H:%M:%S`). Global step 10 commits two
    stats dicts (W&B steps 10 and 11), so later steps log one W&B step on."""
    import time

    out: list[str] = []

    def log(step: int, message: str) -> None:
        stamp = time.strftime("%Y%m%d-%H:%M:%S", time.gmtime(START + step * 96.0))
        out.append(f"(AReaL) {stamp}.{step * 37 % 1000:03d} StatsLogger INFO: {message}")

    c = curves(22, seed=16)
    last_commit = -1
    for global_step in range(22):
        s = c[global_step]
        log(
            global_step,
            f"Epoch 1/1 Step {global_step + 1}/22 Train step {global_step + 1}/22 done.",
        )
        stats = {  # five keys: the box table's borders are most of its bytes
            "ppo_actor/task_reward/avg": s["reward"],
            "ppo_actor/update/entropy/avg": s["entropy"],
            "ppo_actor/update/approx_kl/avg": s["ppo_kl"],
            "ppo_actor/update/grad_norm": NAN if global_step == 18 else s["grad_norm"],
            "ppo_actor/no_eos_ratios/avg": s["truncated"],
        }
        data = (
            [stats, {**stats, "ppo_actor/task_reward/avg": s["reward"] + 0.01}]
            if global_step == 10
            else [stats]
        )
        log_step = max(global_step, last_commit + 1)
        for i, item in enumerate(data):
            log(global_step, f"Stats ({i + 1}/{len(data)}):")
            log(global_step, "\n" + TABULATE_STATS(item))
        last_commit = log_step + len(data) - 1
    return {"areal/areal_gsm8k.log": "\n".join(out) + "\n"}


WRITERS: tuple[Callable[[], dict[str, str]], ...] = (roll, slime, skyrl, prime_rl, nemo_rl, areal)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fail when a fixture is stale")
    parser.add_argument(
        "--areal-wheel",
        type=Path,
        help="an AReaL wheel: print AReaL's tables with its own tabulate_stats",
    )
    args = parser.parse_args()
    if args.areal_wheel is not None:
        global TABULATE_STATS
        TABULATE_STATS = areal_printing(args.areal_wheel)
    stale = []
    for writer in WRITERS:
        for rel, text in writer().items():
            path = OUT / rel
            if args.check:
                if not path.is_file() or path.read_text(encoding="utf-8") != text:
                    stale.append(rel)
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            print(f"{rel}: {len(text.encode()):,} bytes")
    if stale:
        print("stale: " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
