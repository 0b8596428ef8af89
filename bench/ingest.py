"""Console-reader throughput on a generated verl log, against a per-line Python parser.

    python bench/ingest.py [--steps 100000] [--repeat 3] [--metrics 50]

Writes (once, cached in the temp dir) a verl 0.5-style console log: a Ray-prefixed config dump,
`step:N - k:v - …` lines with ANSI-coloured `(TaskRunner pid=…)` prefixes, a tqdm update after
every step, validation merged every 10 steps and worker warnings. Then times, median of
`--repeat` interleaved runs each: reading the bytes (the floor), a straightforward per-line Python regex
parser that builds the same long polars frame (the baseline), and `logscope.ingest.console.read`
(with its C item tokenizer when it was built, and again with polars alone: what a machine without
a C compiler gets). Prints MB/s and the ratio logscope / baseline (acceptance: ≥ 6).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

from logscope.ingest import console, console_items

KEYS = [
    *(
        f"global_seqlen/{k}"
        for k in ("min", "max", "minmax_diff", "balanced_min", "balanced_max", "mean")
    ),
    "actor/entropy",
    *(f"critic/{k}" for k in ("vf_loss", "vf_clipfrac", "vpred_mean", "grad_norm", "lr")),
    "perf/mfu/critic",
    *(
        f"actor/{k}"
        for k in (
            "kl_loss",
            "kl_coef",
            "pg_loss",
            "pg_clipfrac",
            "ppo_kl",
            "pg_clipfrac_lower",
            "grad_norm",
        )
    ),
    "perf/mfu/actor",
    "perf/max_memory_allocated_gb",
    "perf/max_memory_reserved_gb",
    "perf/cpu_memory_used_gb",
    "actor/lr",
    "training/global_step",
    "training/epoch",
    *(
        f"critic/{g}/{s}"
        for g in ("score", "rewards", "advantages", "returns", "values")
        for s in ("mean", "max", "min")
    ),
    "critic/vf_explained_var",
    *(f"response_length/{k}" for k in ("mean", "max", "min", "clip_ratio")),
    *(f"prompt_length/{k}" for k in ("mean", "max", "min", "clip_ratio")),
    *(
        f"timing_s/{k}"
        for k in (
            "gen",
            "reward",
            "old_log_prob",
            "ref",
            "values",
            "adv",
            "update_critic",
            "update_actor",
            "step",
        )
    ),
    *(
        f"timing_per_token_ms/{k}"
        for k in ("gen", "ref", "values", "adv", "update_critic", "update_actor")
    ),
    "perf/total_num_tokens",
    "perf/time_per_step",
    "perf/throughput",
]
VAL_KEYS = [
    "val-core/openai/gsm8k/acc/mean@1",
    "val-aux/openai/gsm8k/reward/mean@1",
    "timing_s/testing",
]
PREFIX = "\x1b[36m(TaskRunner pid=2231)\x1b[0m "
WORKER = "\x1b[36m(WorkerDict pid=3141)\x1b[0m "


def generate(path: Path, steps: int, n_metrics: int, seed: int = 0) -> None:
    """A realistic verl console log with `steps` step lines of about `n_metrics` metrics."""
    rng = random.Random(seed)
    keys = KEYS[:n_metrics]
    config = {
        "actor_rollout_ref": {"actor": {"optim": {"lr": 1e-6}, "ppo_mini_batch_size": 256}},
        "algorithm": {"adv_estimator": "gae"},
        "trainer": {"project_name": "bench", "experiment_name": "ingest", "total_epochs": 15},
    }
    import pprint

    with open(path, "w", encoding="utf-8") as f:
        for line in pprint.pformat(config).splitlines():
            f.write(PREFIX + line + "\n")
        f.write(PREFIX + f"Total training steps: {steps}\n")
        for s in range(1, steps + 1):
            values = []
            for k in keys:
                if k == "training/global_step":
                    values.append(f"{k}:{s}")
                elif k.startswith(("global_seqlen", "response_length/m", "prompt_length/m")):
                    values.append(f"{k}:{rng.randint(100, 500000)}")
                else:
                    values.append(f"{k}:{rng.gauss(0, 1) * 10 ** rng.randint(-6, 3)!r}")
            if s % 10 == 0:
                values[20:20] = [f"{k}:{rng.random()!r}" for k in VAL_KEYS]
            f.write(PREFIX + f"step:{s} - " + " - ".join(values) + "\n")
            pct = 100 * s // steps
            f.write(
                f"{PREFIX}\rTraining Progress: {pct:3d}%|█▍        | {s}/{steps} [{s // 60:02d}:{s % 60:02d}<00:00,  2.50s/it]\n"
            )
            if s % 500 == 0:
                f.write(WORKER + "WARN: rank 0 grad_norm is not finite: nan\n")


# ---- the baseline: a straightforward per-line Python regex parser -----------------------------

ANSI = re.compile(r"\x1b\[[0-9;]*m")
RAY_PREFIX = re.compile(r"^\([^)]*\) ?")
STEP = re.compile(r"^step:(\d+) - (.*)$")
VALUE = re.compile(
    r"(?:np\.(?:float|int|uint)\d+\()?(-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|nan|-?inf|True|False)\)?"
)


def baseline(path: Path) -> pl.DataFrame:
    steps: list[int] = []
    keys: list[str] = []
    values: list[float] = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            for part in ANSI.sub("", line.rstrip("\n")).split("\r"):
                m = STEP.match(RAY_PREFIX.sub("", part))
                if m is None:
                    continue
                step = int(m.group(1))
                for item in m.group(2).split(" - "):
                    key, _, text = item.rpartition(":")
                    v = VALUE.fullmatch(text)
                    if not key or v is None:
                        continue
                    g = v.group(1)
                    steps.append(step)
                    keys.append(key)
                    values.append(1.0 if g == "True" else 0.0 if g == "False" else float(g))
    return pl.DataFrame({"step": steps, "metric": keys, "value": values})


def read_without_c(path: Path) -> object:
    native, console_items.native = console_items.native, None
    try:
        return console.read(path)
    finally:
        console_items.native = native


def read_bytes(path: Path) -> int:
    with open(path, "rb") as f:
        return len(f.read())


def timed(fns: dict[str, object], repeat: int) -> dict[str, tuple[float, float, object]]:
    """Median wall and CPU seconds (all threads) of each function, runs interleaved so that a
    change in machine load hits all of them alike; with the last result of each."""
    walls: dict[str, list[float]] = {name: [] for name in fns}
    cpus: dict[str, list[float]] = {name: [] for name in fns}
    results: dict[str, object] = {}
    for _ in range(repeat):
        for name, fn in fns.items():
            t, c = time.perf_counter(), time.process_time()
            results[name] = fn()  # type: ignore[operator]
            walls[name].append(time.perf_counter() - t)
            cpus[name].append(time.process_time() - c)
    return {
        name: (statistics.median(walls[name]), statistics.median(cpus[name]), results[name])
        for name in fns
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--metrics", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--path", type=Path, default=None, help="where to write the log (cached)")
    args = ap.parse_args(argv)

    path = (
        args.path or Path(tempfile.gettempdir()) / f"logscope_bench_{args.steps}_{args.metrics}.log"
    )
    if not path.exists():
        t = time.perf_counter()
        generate(path, args.steps, args.metrics)
        print(f"generated {path} in {time.perf_counter() - t:.1f}s")
    mb = path.stat().st_size / 1e6
    print(f"input: {path} ({mb:.1f} MB, {args.steps} steps, ~{args.metrics} metrics/line)")

    contenders = {
        "raw read (floor)": lambda: read_bytes(path),
        "per-line Python": lambda: baseline(path),
        "logscope console.read": lambda: console.read(path),
    }
    if console_items.native is not None:  # what a machine without a C compiler gets
        contenders["  items by polars only"] = lambda: read_without_c(path)
    print(f"items tokenized by: {'C (_items.c)' if console_items.native else 'polars'}")
    timings = timed(contenders, args.repeat)
    t_base, c_base, base = timings["per-line Python"]
    t_ours, c_ours, runs = timings["logscope console.read"]
    ours = runs[0].metrics  # type: ignore[index]
    columns = ["step", "metric", "value"]
    same = ours.select(columns).sort(columns).equals(base.sort(columns), null_equal=True)  # type: ignore[union-attr]

    print(f"{'':24s}{'wall s':>10s}{'MB/s':>10s}{'CPU s':>10s}")
    for name, (t, c, _) in timings.items():
        print(f"{name:24s}{t:10.3f}{mb / t:10.1f}{c:10.3f}")
    ratio = t_base / t_ours
    print(
        f"ratio logscope / per-line Python: {ratio:.1f}x wall (target >= 6), {c_base / c_ours:.1f}x CPU"
    )
    if "  items by polars only" in timings:
        t_pl = timings["  items by polars only"][0]
        print(f"  without the C tokenizer: {t_base / t_pl:.1f}x wall ({t_pl / t_ours:.2f}x slower)")
    print(f"rows: {ours.height:,} metric values; same values as the baseline: {same}")
    try:
        load = os.getloadavg()[0]
        print(f"load average while measuring: {load:.1f} on {os.cpu_count()} CPUs")
    except OSError:
        pass
    return 0 if ratio >= 6 else 1


if __name__ == "__main__":
    sys.exit(main())
