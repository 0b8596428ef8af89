"""Peak memory and time of `logscope analyze` on a big generated verl console log.

    python bench/big_file.py --size 1G                  # realistic: a step every ~50 KB of output
    python bench/big_file.py --size 5G
    python bench/big_file.py --size 1G --mode steps     # worst case: nothing but step lines
    python bench/big_file.py --size 5G --mode progress  # a step every ~50 KB of progress bars
    python bench/big_file.py --long-line 200M           # one 200 MB line, no newline

The log is generated on the fly into the temp directory (a real-shaped verl 0.5 log from
`logscope.synthetic`, its step section repeated with shifted step numbers, and, in the realistic
mode, worker output between steps: vLLM stats, Ray warnings, printed generations; in the
progress mode, tqdm bars) and deleted afterwards. Each measurement runs in a fresh process; peak RSS is the kernel's (wait4 ru_maxrss).
Printed: file size, steps, seconds, MB/s, peak RSS of (1) `python -c pass` with logscope's
imports (the floor), (2) the reader alone (`logscope.ingest.load`), (3) `logscope analyze
--no-cache -f json`, and (4) a second `analyze` that reads the store's Parquet instead.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
_STEP = re.compile(rb"step:(\d+) - ")

NOISE = [
    b"(WorkerDict pid=48211) INFO 11-30 10:12:01 [metrics.py:351] Avg prompt throughput: "
    b"12873.4 tokens/s, Avg generation throughput: 4410.2 tokens/s, Running: 212 reqs, "
    b"Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 71.3%, CPU KV cache usage: 0.0%.",
    b"(WorkerDict pid=48213) [rank3]:[W1130 10:12:02.171] Warning: "
    b"TORCH_NCCL_AVOID_RECORD_STREAMS is the default now, this environment variable is ignored",
    b"(raylet) [2026-11-30 10:12:03,117 W 48011 48011] memory_monitor.cc:197: "
    b"Memory usage 0.81 of 0.95 threshold",
    b"(TaskRunner pid=47990) [prompt] <|im_start|>user\\nJanet has 3 apples and buys 5 more. "
    b"How many apples does she have? Let's think step by step and output the final answer "
    b"after ####.<|im_end|>\\n<|im_start|>assistant\\n",
    b"(TaskRunner pid=47990) [response] Janet starts with 3 apples. She buys 5 more, so "
    + b"she has 3 + 5 = 8 apples. " * 12
    + b"#### 8",
    b"(TaskRunner pid=47990) [ground_truth] 8",
    b"(TaskRunner pid=47990) [score] 1.0",
    b"(WorkerDict pid=48212) /usr/lib/python3/dist-packages/torch/distributed/fsdp/"
    b"_init_utils.py:440: UserWarning: FSDP is switching to use `NO_SHARD` instead of "
    b"ShardingStrategy.FULL_SHARD since the world size is 1.",
]


# What a progress-bar-heavy log holds between steps (the reader drops these in bulk).
PROGRESS = [
    b"Training Progress:  %d%%|\xe2\x96\x88\xe2\x96\x88     | 40/200 [12:01<48:04, 18.03s/it]",
    b"Processed prompts: 100%|\xe2\x96\x88\xe2\x96\x88\xe2\x96\x88| 1024/1024 "
    b"[00:41<00:00, 24.63it/s, est. speed input: 3185.12 toks/s, output: 11290.50 toks/s]",
    b"",
]


def parse_size(text: str) -> int:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([KMG]?)B?", text.strip().upper())
    if not m:
        raise SystemExit(f"bad size {text!r}: expected e.g. 200M, 1G, 5G")
    return int(float(m.group(1)) * _UNITS.get(m.group(2), 1))


def _template() -> tuple[bytes, list[bytes], int]:
    """(header, body lines, steps in the body) of a real-shaped verl 0.5 console log."""
    from logscope.synthetic import simulate, write_console_log

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.log"
        write_console_log(simulate(n_steps=200, seed=1), path, version="0.5")
        lines = path.read_bytes().splitlines(keepends=True)
    first = next(i for i, line in enumerate(lines) if _STEP.search(line))
    last = max(i for i, line in enumerate(lines) if _STEP.search(line))
    return b"".join(lines[:first]), lines[first : last + 1], 200


def _shift(line: bytes, offset: int) -> bytes:
    return _STEP.sub(lambda m: b"step:%d - " % (int(m.group(1)) + offset), line)


def generate(path: Path, size: int, mode: str, step_every: int) -> int:
    """Write a log of about `size` bytes; returns the number of steps in it."""
    header, body, per_round = _template()
    noise = b"\n".join(NOISE if mode == "realistic" else PROGRESS) + b"\n"
    noise = noise.replace(b"%d%%", b"20%")
    written, rounds = 0, 0
    with path.open("wb", buffering=1 << 22) as fh:
        fh.write(header)
        written += len(header)
        while written < size:
            offset = rounds * per_round
            out = []
            for line in body:
                if offset:
                    line = _shift(line, offset)
                out.append(line)
                if mode != "steps" and _STEP.search(line):
                    out.append(noise * max(1, step_every // len(noise)))
            chunk = b"".join(out)
            fh.write(chunk)
            written += len(chunk)
            rounds += 1
    return rounds * per_round


def generate_long_line(path: Path, size: int) -> None:
    block = b"abcdefghij" * 100_000
    with path.open("wb") as fh:
        fh.write(b"step:1 - actor/pg_loss:0.1 - junk:")
        for _ in range(size // len(block)):
            fh.write(block)


def measure(argv: list[str], timeout: float) -> tuple[int | None, float, float]:
    """(exit code or None when killed at `timeout`, seconds, peak RSS MB)."""
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode, time.monotonic() - start, usage.ru_maxrss / 1024
        if time.monotonic() - start > timeout:
            proc.kill()
            _, _, usage = os.wait4(proc.pid, 0)
            proc.returncode = -9
            return None, time.monotonic() - start, usage.ru_maxrss / 1024
        time.sleep(0.05)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="1G", help="log size (e.g. 200M, 1G, 5G)")
    ap.add_argument("--mode", choices=("realistic", "progress", "steps"), default="realistic")
    ap.add_argument("--step-every", default="50K", help="realistic mode: bytes of output per step")
    ap.add_argument("--long-line", default=None, help="instead: one line of this size")
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument(
        "--runs",
        default="imports,reader,analyze,store",
        help="which measurements (comma-separated): imports, reader, analyze, store",
    )
    args = ap.parse_args()

    py = sys.executable
    with tempfile.TemporaryDirectory(prefix="logscope-big-") as tmp:
        path = Path(tmp) / "big.log"
        t0 = time.monotonic()
        if args.long_line:
            generate_long_line(path, parse_size(args.long_line))
            steps = 1
            what = f"one {args.long_line} line without a newline"
        else:
            steps = generate(path, parse_size(args.size), args.mode, parse_size(args.step_every))
            what = f"{args.mode} verl 0.5 log"
        size_mb = path.stat().st_size / (1 << 20)
        print(
            f"{what}: {size_mb:,.0f} MB, {steps:,} steps (generated in {time.monotonic() - t0:.0f} s)"
        )
        store = Path(tmp) / "store"
        runs = [
            ("imports only", [py, "-c", "import logscope.cli.main, logscope.ingest.console"]),
            ("reader (ingest.load)", [py, "-c", f"from logscope.ingest import load; load({str(path)!r})"]),
            ("analyze --no-cache", [py, "-m", "logscope", "analyze", str(path), "--no-cache", "-f", "json"]),
            ("analyze (fills store)", [py, "-m", "logscope", "analyze", str(path), "--store", str(store), "-f", "json"]),
            ("analyze (from store)", [py, "-m", "logscope", "analyze", str(path), "--store", str(store), "-f", "json"]),
        ]  # fmt: skip
        keep = {k.strip() for k in args.runs.split(",")}
        tags = ["imports", "reader", "analyze", "store", "store"]
        runs = [r for r, tag in zip(runs, tags, strict=True) if tag in keep]
        if args.long_line:
            runs = [r for r in runs if "store" not in r[0]]
        print(f"{'what':24} {'exit':>5} {'seconds':>9} {'MB/s':>8} {'peak RSS MB':>12}")
        for name, argv in runs:
            code, seconds, rss = measure(argv, args.timeout)
            rate = size_mb / seconds if name != "imports only" else float("nan")
            shown = "killed" if code is None else str(code)
            print(f"{name:24} {shown:>5} {seconds:9.1f} {rate:8.1f} {rss:12.0f}", flush=True)
        path.unlink()


if __name__ == "__main__":
    main()
