"""W&B offline runs: logscope's `.wandb` reader vs `wandb leet inspect --json` (wandb's own reader).

    python bench/wandb_offline.py [--steps 2000] [--keys 50] [--repeat 3]

Writes one offline run with the real wandb SDK (`WANDB_MODE=offline`, in a subprocess; cached in
the bench work folder): `--steps` calls of `wandb.log({...}, step=s)` with `--keys` metrics each.
Then times, median of --repeat runs, on the same `.wandb` file:

- logscope: `logscope.ingest.wandb_offline.read` in this process (a polars long frame of every
  value, plus config, summary and console output); also once per repetition in a fresh
  `python -c` process, imports included, for a like-for-like comparison with a CLI;
- wandb: `wandb leet inspect --json FILE` as a subprocess (wandb 0.31's offline reader; one JSON
  object per record), its output parsed into rows (the `history` records' items).

Both must give the same rows: the number of history rows, and a random sample of (step, key)
values compared exactly. Target: logscope ≥ 5× faster than wandb leet.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

if __package__ in (None, ""):
    sys.path[:] = [
        p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent
    ]
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import Results, command_line, fmt_times, timed, workdir

TARGET = 5.0

_WRITER = textwrap.dedent(
    """
    import random, sys
    import wandb
    steps, n_keys = int(sys.argv[1]), int(sys.argv[2])
    groups = ["actor", "critic", "perf", "timing_s", "response_length", "val-core"]
    keys = [f"{groups[i % len(groups)]}/metric_{i}" for i in range(n_keys)]
    rng = random.Random(0)
    config = {
        "actor_rollout_ref": {"actor": {"optim": {"lr": 1e-6}, "ppo_mini_batch_size": 256}},
        "algorithm": {"adv_estimator": "grpo"},
        "trainer": {"project_name": "bench", "experiment_name": "wandb-offline"},
    }
    run = wandb.init(project="bench", name="wandb-offline", config=config)
    for step in range(1, steps + 1):
        wandb.log({k: rng.gauss(0.0, 1.0) for k in keys}, step=step)
        if step % 100 == 0:
            print(f"step:{step} - done", flush=True)
    wandb.finish()
    """
)


def prepare(steps: int, keys: int) -> Path:
    """The `.wandb` file of a run written by the real SDK in offline mode."""
    folder = workdir("wandb", f"run_{steps}x{keys}")
    found = sorted(folder.glob("wandb/offline-run-*/run-*.wandb"))
    if (folder / ".complete").exists() and found:
        return found[0]
    shutil.rmtree(folder / "wandb", ignore_errors=True)
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true", "WANDB_DIR": str(folder)}
    subprocess.run(
        [sys.executable, "-c", _WRITER, str(steps), str(keys)],
        check=True,
        env=env,
        cwd=folder,
        stdout=subprocess.DEVNULL,
    )
    (folder / ".complete").write_text("ok")
    return sorted(folder.glob("wandb/offline-run-*/run-*.wandb"))[0]


def read_logscope(path: Path):  # type: ignore[no-untyped-def]
    from logscope.ingest import wandb_offline

    return wandb_offline.read(path)[0].metrics


def read_logscope_fresh(path: Path) -> None:
    code = "import sys; from logscope.ingest import wandb_offline; wandb_offline.read(sys.argv[1])"
    subprocess.run([sys.executable, "-c", code, str(path)], check=True)


def read_leet(path: Path) -> list[dict]:
    """History rows from `wandb leet inspect --json`; raises with its output when it fails."""
    exe = shutil.which("wandb")
    if exe is None:
        raise RuntimeError("the `wandb` command is not on PATH")
    proc = subprocess.run(
        [exe, "leet", "inspect", "--json", str(path)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"`wandb leet inspect --json` exited {proc.returncode}: {proc.stderr.strip()[:500]}"
        )
    rows = []
    for line in proc.stdout.splitlines():
        if '"history"' not in line:
            continue
        record = json.loads(line)
        if record.get("type") == "history":
            rows.append(record["history"]["item"])
    return rows


def compare(frame, rows: list[dict], sample: int = 200, seed: int = 0) -> tuple[int, int, int]:  # type: ignore[no-untyped-def]
    """(rows logscope, rows wandb, mismatches in a random sample of (step, key) values)."""
    import polars as pl

    ours = frame.filter(pl.col("value").is_not_null())
    values = {(s, m): v for s, m, v in ours.select("step", "metric", "value").iter_rows()}
    n_ours = ours["step"].n_unique()
    rng = random.Random(seed)
    cells = [
        (int(r["_step"]), k, v)
        for r in rows
        for k, v in r.items()
        if not k.startswith("_") and isinstance(v, int | float)
    ]
    mismatches = 0
    for step, key, v in rng.sample(cells, min(sample, len(cells))):
        got = values.get((step, key))
        if got is None or got != float(v):
            mismatches += 1
    return n_ours, len(rows), mismatches


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--keys", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", type=Path, default=None, help="write the results here (runner)")
    args = ap.parse_args(argv)
    res = Results("wandb_offline", command_line())

    path = prepare(args.steps, args.keys)
    res.say(
        f"== {path.name}: {args.steps:,} steps x {args.keys} keys, "
        f"{path.stat().st_size / 1e6:.1f} MB, written by wandb (offline) =="
    )
    read_logscope(path)  # imports warmed
    ours = timed(lambda: read_logscope(path), args.repeat)
    fresh = timed(lambda: read_logscope_fresh(path), args.repeat)
    try:
        leet = timed(lambda: read_leet(path), args.repeat)
    except (RuntimeError, OSError) as exc:
        res.say(f"wandb leet inspect failed: {exc}")
        res.check(
            "logscope vs wandb leet inspect --json",
            None,
            "x",
            f">= {TARGET:g}x",
            None,
            note=f"baseline failed: {exc}",
        )
        res.write(args.json)
        return 1
    n_ours, n_leet, bad = compare(ours.result, leet.result)
    res.say(f"{'':38s}{'wall s':>8s}{'ratio':>8s}{'cpu s':>8s}{'ratio':>8s}   wall runs")
    for name, x in (
        ("logscope wandb_offline.read", ours),
        ("logscope, fresh process (+imports)", fresh),
        ("wandb leet inspect --json (+parse)", leet),
    ):
        res.say(
            f"{name:38s}{x.wall:8.3f}{x.wall / ours.wall:7.1f}x{x.cpu:8.3f}"
            f"{x.cpu / ours.cpu:7.1f}x   {fmt_times(x.walls)}"
        )
    res.say(
        f"history rows: logscope {n_ours:,}, wandb leet {n_leet:,}; sampled values differing: {bad}/200"
    )
    ratio = leet.wall / ours.wall
    same = n_ours == n_leet == args.steps and bad == 0
    res.check(
        "logscope vs wandb leet inspect --json (wall)",
        ratio,
        "x",
        f">= {TARGET:g}x, same rows",
        ratio >= TARGET and same,
        note=f"rows {n_ours:,} vs {n_leet:,}, {bad} of 200 sampled values differ; "
        f"CPU-time ratio {leet.cpu / ours.cpu:.1f}x",
    )
    res.check(
        "logscope in a fresh process vs wandb leet (wall, informative)",
        leet.wall / fresh.wall,
        "x",
        "(none)",
        None,
        note="both pay process start and imports",
    )
    res.write(args.json)
    return res.exit_code()


if __name__ == "__main__":
    sys.exit(main())
