"""Write a simulated run as the console log verl prints (verl_formats.md §1).

`format_step_line` is verl's `concat_dict_to_str` for a given version; `write_console_log`
lays out a whole log: Ray start-up, the pprinted config dump, start-up lines, validation,
step lines, tqdm updates on stderr, worker warnings, events, a restart, the final validation.
"""

from __future__ import annotations

import gzip
import math
import numbers
import pprint
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from logscope.synthetic.config import GSM8K_TEST_PROMPTS, get, steps_per_epoch
from logscope.synthetic.families import NP_FLOAT_METRICS, NP_INT_METRICS
from logscope.synthetic.simulate import INT_METRICS, SimRun
from logscope.synthetic.versions import at_least, check_version, driver_name, ray_pids, repr_era

CYAN, GREEN, YELLOW, RESET = "\x1b[36m", "\x1b[32m", "\x1b[33m", "\x1b[0m"
DEDUP_HINT = (
    " (Ray deduplicates logs by default. Set RAY_DEDUP_LOGS=0 to disable log deduplication, or see "
    "https://docs.ray.io/en/master/ray-observability/user-guides/configure-logging.html"
    "#log-deduplication for more options.)"
)
_PREFIX_RE = re.compile(r"^\((?:[A-Za-z_][\w.]*|raylet)(?: pid=\d+)?(?:, ip=[0-9a-fA-F.:]+)?\) ")


def format_step_line(step: int, data: dict[str, Any], version: str) -> str:
    """verl's `concat_dict_to_str(data, step)` as printed by `version` (§1.1, §1.2).

    Keys in insertion order, only `numbers.Number` values (bool included), `" - "` joined;
    `.3f` for 0.1-0.4, `pprint.pformat` (= repr for scalars) from 0.5 on.
    """
    three = not repr_era(version)
    out = [f"step:{step}"]
    for key, value in data.items():
        if isinstance(value, numbers.Number):
            out.append(f"{key}:{value:.3f}" if three else f"{key}:{pprint.pformat(value)}")
    return " - ".join(out)


# --------------------------------------------------------------------------------------------
def _spec(name: str, version: str) -> str:
    """%-format spec printing a value of `name` as `format_step_line` does for `version`."""
    if not repr_era(version):
        return "%.3f"
    v09 = at_least(version, "0.9")
    if v09 and name.startswith(("val-core/", "val-aux/")):
        if name.startswith("val-aux/num_turns/") and name[-4:] in ("/min", "/max"):
            return "np.int64(%d)"
        return "np.float64(%r)"
    if name in NP_INT_METRICS:
        return "np.int64(%d)"
    if name in NP_FLOAT_METRICS:
        return "np.float64(%r)"
    if name in INT_METRICS and not (v09 and name.startswith("global_seqlen/")):
        return "%d"
    return "%r"


def step_value(name: str, value: float, version: str) -> Any:
    """The Python/numpy object verl would have in its metrics dict for this value."""
    spec = _spec(name, version)
    if not math.isfinite(value):
        return float(value)
    if spec.startswith("np.int64"):
        return np.int64(int(value))
    if spec.startswith("np.float64"):
        return np.float64(value)
    if spec == "%d":
        return int(value)
    return float(value)


def step_lines(
    frame: pl.DataFrame, order: list[str], version: str
) -> Iterator[tuple[int, str, float]]:
    """(step, line body without prefix, wall_time) for every step in a long metrics frame.

    Equivalent to `format_step_line(step, {name: step_value(...)}, version)` per step, but one
    %-template per set of present metrics, so 100k-step logs format in seconds.
    """
    if frame.height == 0:
        return
    rank = {name: i for i, name in enumerate(order)}
    parts = frame.partition_by("metric", as_dict=True)
    names = sorted((k[0] for k in parts), key=lambda n: (rank.get(n, len(rank)), n))
    steps = np.sort(frame.get_column("step").unique().to_numpy())
    size = len(steps)
    values: dict[str, np.ndarray] = {}
    masks: dict[str, np.ndarray] = {}
    for name in names:
        sub = parts[(name,)]
        pos = np.searchsorted(steps, sub.get_column("step").to_numpy())
        arr = np.full(size, np.nan)
        arr[pos] = sub.get_column("value").to_numpy()
        mask = np.zeros(size, dtype=bool)
        mask[pos] = True
        values[name], masks[name] = arr, mask
    sparse = [n for n in names if not masks[n].all()]
    code = np.zeros(size, dtype=np.int64)
    groups: dict[bytes, np.ndarray] = {}
    if sparse:
        bits = np.stack([masks[n] for n in sparse], axis=1)
        keys = np.packbits(bits, axis=1)
        _, code = np.unique(keys, axis=0, return_inverse=True)
        code = code.reshape(-1)
    for c in np.unique(code):
        groups[bytes([int(c) % 256, int(c) // 256])] = np.nonzero(code == c)[0]
    walls = frame.group_by("step").agg(pl.col("wall_time").max()).sort("step")
    wall = walls.get_column("wall_time").fill_null(0.0).to_numpy()
    lines: list[str | None] = [None] * size
    for idx in groups.values():
        present = [n for n in names if masks[n][idx[0]]]
        specs = []
        for n in present:
            spec = _spec(n, version)
            if "%d" in spec and not np.isfinite(values[n][idx]).all():
                spec = "%r"
            specs.append(n.replace("%", "%%") + ":" + spec)
        template = " - ".join(["step:%d", *specs])
        columns = [steps[idx].tolist()] + [values[n][idx].tolist() for n in present]
        for i, row in zip(idx.tolist(), zip(*columns, strict=True), strict=True):
            lines[i] = template % row
    for i, step in enumerate(steps.tolist()):
        yield step, lines[i] or f"step:{step}", float(wall[i])


# --------------------------------------------------------------------------------------------
def _fmt_interval(seconds: float) -> str:
    seconds = int(max(0, seconds))
    m, s = divmod(seconds, 60)
    h, m = divmod(m, 60)
    return f"{h:d}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


def tqdm_line(
    n: int, total: int, elapsed: float | None, initial: int = 0, desc: str = "Training Progress"
) -> str:
    """tqdm's non-TTY meter (10-cell bar) for `n`/`total` after `elapsed` seconds (§1.5)."""
    frac = n / total if total else 0.0
    cells = frac * 10
    full = int(cells)
    bar = "█" * full
    if full < 10:
        bar += " ▏▎▍▌▋▊▉"[int((cells - full) * 8)]
    bar = bar.ljust(10)
    pct = f"{frac * 100:3.0f}%"
    if not elapsed or n <= initial:
        meter = f"[{_fmt_interval(elapsed or 0)}<?, ?it/s]"
    else:
        rate = (n - initial) / elapsed
        remaining = (total - n) / rate if rate else 0
        rate_fmt = f"{rate:5.2f}it/s" if rate >= 1 else f"{1 / rate:5.2f}s/it"
        meter = f"[{_fmt_interval(elapsed)}<{_fmt_interval(remaining)}, {rate_fmt}]"
    return f"{desc}: {pct}|{bar}| {n}/{total} {meter}"


class _Writer:
    def __init__(self, sim: SimRun, version: str, ray_prefix: bool, ansi: bool, tqdm: bool) -> None:
        self.sim = sim
        self.version = version
        self.ray_prefix = ray_prefix
        self.ansi = ansi
        self.tqdm = tqdm and at_least(version, "0.3")
        self.pid, self.worker_pids = ray_pids(sim.seed)
        self.out: list[str] = []
        self._driver_pre: str | None = None
        self._driver_pid = self.pid

    def prefix(self, name: str, pid: int) -> str:
        if not self.ray_prefix:
            return ""
        text = f"({name} pid={pid})"
        return f"{CYAN}{text}{RESET} " if self.ansi else f"{text} "

    def driver(self, text: str) -> None:
        if self._driver_pre is None or self._driver_pid != self.pid:
            self._driver_pre = self.prefix(driver_name(self.version), self.pid)
            self._driver_pid = self.pid
        pre = self._driver_pre
        if "\n" not in text:
            self.out.append(pre + text)
            return
        for line in text.split("\n"):
            self.out.append(pre + line)

    def raw(self, text: str) -> None:
        for line in text.split("\n"):
            self.out.append(line)

    def event(self, text: str) -> None:
        """Event lines carry their own Ray prefix (or none for the driver's traceback)."""
        for line in text.split("\n"):
            match = _PREFIX_RE.match(line)
            if match and not self.ray_prefix:
                line = line[match.end() :]
            elif match and self.ansi:
                line = f"{CYAN}{match.group(0)[:-1]}{RESET} " + line[match.end() :]
            if self.ansi and "[repeated" in line:
                line = re.sub(r" (\[repeated \d+x across cluster\])", rf"{GREEN} \1{RESET}", line)
            self.out.append(line)

    def worker(self, text: str, rank: int = 0, repeated: int = 0, first: bool = False) -> None:
        line = self.prefix("WorkerDict", self.worker_pids[rank % 8]) + text
        if repeated and self.ray_prefix:
            suffix = f" [repeated {repeated}x across cluster]"
            line += f"{GREEN}{suffix}{RESET}" if self.ansi else suffix
        if first and self.ray_prefix:
            line += DEDUP_HINT
        self.out.append(line)


def _ray_start(w: _Writer, when: str) -> None:
    dash = "127.0.0.1:8265"
    if w.ansi:
        dash = f"\x1b[1m\x1b[32m{dash} \x1b[39m\x1b[22m"
    w.raw(
        f"{when},482\tINFO worker.py:1879 -- Started a local Ray instance. View the dashboard at {dash}"
    )
    if at_least(w.version, "0.6"):
        w.raw(
            "ray init kwargs: {'num_cpus': None, 'runtime_env': {'env_vars': {'TOKENIZERS_PARALLELISM': "
            "'true', 'NCCL_DEBUG': 'WARN', 'VLLM_LOGGING_LEVEL': 'WARN'}}}"
        )


def _startup(w: _Writer, cfg: dict[str, Any], config_dump: bool, total: int) -> None:
    v = w.version
    if at_least(v, "0.4") and not at_least(v, "0.9"):
        w.driver(f"TaskRunner hostname: gpu-node-0{w.sim.seed % 8}, PID: {w.pid}")
    if config_dump:
        w.driver(pprint.pformat(cfg, width=80))
    if at_least(v, "0.3"):
        w.driver(f"dataset len: {7473}")
        w.driver(f"dataset len: {w.sim.dynamics.val_size or GSM8K_TEST_PROMPTS}")
    spe = steps_per_epoch(cfg)
    if at_least(v, "0.4"):
        w.driver(f"Size of train dataloader: {spe}, Size of val dataloader: 1")
    elif v == "0.3":
        w.driver(f"Size of train dataloader: {spe}")
    else:
        w.driver(f"Size of train dataloader: {spe}")
        w.driver("Size of val dataloader: 1")
    if at_least(v, "0.9"):
        w.driver(f"INFO:2026-01-15 09:14:03,117:Total training steps: {total}")
    else:
        w.driver(f"Total training steps: {total}")
    if at_least(v, "0.4"):
        w.driver("[validate_config] All configuration checks passed successfully!")
    w.worker(
        "You're using a Qwen2TokenizerFast tokenizer. Please note that with a fast tokenizer, using "
        "the `__call__` method is faster than using a method to encode the text followed by a call "
        "to the `pad` method to get a padded encoding.",
        rank=1,
        repeated=3,
        first=True,
    )
    if at_least(v, "0.4"):
        w.worker(
            "Flash Attention 2.0 only supports torch.float16 and torch.bfloat16 dtypes, but the "
            "current dype in Qwen2ForCausalLM is torch.float32. You should run training or "
            "inference using Automatic Mixed-Precision via the `with torch.autocast(device_type="
            "'torch_device'):` decorator, or load the model with the `torch_dtype` argument.",
            rank=0,
        )
        w.worker("Flash Attention 2.0 only supports torch.float16 ...", rank=2, repeated=3)


def _val_dict(frame: pl.DataFrame, step: int, version: str) -> dict[str, Any]:
    sub = frame.filter((pl.col("step") == step) & pl.col("metric").str.starts_with("val"))
    return {
        m: step_value(m, v, version)
        for m, v in zip(
            sub.get_column("metric").to_list(), sub.get_column("value").to_list(), strict=True
        )
    }


def _order_val(d: dict[str, Any], order: list[str]) -> dict[str, Any]:
    rank = {n: i for i, n in enumerate(order)}
    return dict(sorted(d.items(), key=lambda kv: rank.get(kv[0], 0)))


def write_console_log(
    sim: SimRun,
    path: str | Path,
    version: str | None = None,
    ray_prefix: bool = True,
    ansi: bool = False,
    tqdm: bool = True,
    config_dump: bool = True,
    gz: bool = False,
) -> Path:
    """Write `sim` as the console log verl `version` (default: the simulated one) would print."""
    version = check_version(version or sim.version)
    w = _Writer(sim, version, ray_prefix, ansi, tqdm)
    cfg = sim.config_segments[0][1] if sim.config_segments else sim.config
    train = sim.metrics.filter(~pl.col("metric").str.starts_with("val") | (pl.col("step") > 0))
    total = int(get(sim.config, "trainer.total_training_steps") or 0) or (
        steps_per_epoch(cfg) * int(get(cfg, "trainer.total_epochs", 1))
    )
    first_train = 0 if version == "0.1" else 1
    events: dict[int, list[str]] = {}
    for step, text in sim.events:
        events.setdefault(int(step), []).append(text)
    save_steps = set(_save_steps(sim))
    restart = sim.restart

    _ray_start(w, "2026-01-15 09:12:44")
    _startup(w, cfg, config_dump, total)
    w.driver(
        "Checkpoint tracker file does not exist: "
        f"/root/{get(cfg, 'trainer.default_local_dir')}/latest_checkpointed_iteration.txt"
    )
    w.driver("Training from scratch")
    _initial_validation(w, sim, cfg)

    lines = list(step_lines(train.filter(pl.col("step") >= first_train), sim.metric_order, version))
    if restart:
        cut = restart["last_printed"]
        first_part = [x for x in lines if x[0] <= restart["checkpoint_step"]]
        redo = (
            list(step_lines(sim.superseded, sim.metric_order, version))
            if sim.superseded is not None
            else []
        )
        second_part = [x for x in lines if x[0] >= restart["resume_step"]]
        _loop(
            w,
            first_part + [x for x in redo if x[0] <= cut],
            total,
            0,
            events,
            save_steps,
            final=False,
            skip_events_after=cut,
        )
        _restart_block(w, sim, restart["checkpoint_step"], total)
        _loop(w, second_part, total, restart["checkpoint_step"], events, save_steps, final=True)
    else:
        _loop(w, lines, total, 0, events, save_steps, final=True)

    text = "\n".join(w.out) + "\n"
    path = Path(path)
    if gz:
        with gzip.open(path, "wt", encoding="utf-8", newline="") as fh:
            fh.write(text)
    else:
        path.write_text(text, encoding="utf-8", newline="")
    return path


def _save_steps(sim: SimRun) -> list[int]:
    steps = sim.metrics.filter(pl.col("metric").str.ends_with("save_checkpoint")).get_column("step")
    return [int(s) for s in steps.to_list()]


def _initial_validation(w: _Writer, sim: SimRun, cfg: dict[str, Any]) -> None:
    val0 = _val_dict(sim.metrics, 0, w.version) if w.version != "0.1" else {}
    if w.version == "0.1":
        return
    if not val0:
        return
    val0 = _order_val(val0, sim.metric_order)
    w.driver("validation generation end")
    w.driver(pprint.pformat(f"Initial validation metrics: {val0}"))
    w.driver(format_step_line(0, val0, w.version))


def _loop(
    w: _Writer,
    lines: Iterable[tuple[int, str, float]],
    total: int,
    initial: int,
    events: dict[int, list[str]],
    save_steps: set[int],
    final: bool,
    skip_events_after: int | None = None,
) -> None:
    lines = list(lines)
    if not lines:
        return
    first_dt = (lines[1][2] - lines[0][2]) if len(lines) > 1 else 1.0
    start_wall = lines[0][2] - first_dt
    if w.tqdm:
        w.driver("\r" + tqdm_line(initial, total, None, initial))
    pending: list[str] = []
    rng = np.random.default_rng(w.sim.seed + 17)
    flush_every = rng.integers(1, 4, size=len(lines))
    default_dir = get(w.sim.config, "trainer.default_local_dir")
    last_val: int | None = None
    done = initial
    stopped = False
    for j, (step, body, wall) in enumerate(lines):
        if step in save_steps:
            w.driver(f"local_global_step_folder: {default_dir}/global_step_{step}")
        w.driver(body)
        if " - val-" in body or " - val/test_score" in body:
            last_val = step
        if skip_events_after is None or step <= skip_events_after:
            for text in events.get(step, []):
                w.event(text)
                if "OutOfMemoryError" in text:
                    stopped = True
        if stopped:
            break
        done += 1
        if j % 97 == 41:
            w.worker(
                "/usr/local/lib/python3.10/dist-packages/torch/utils/checkpoint.py:87: UserWarning: "
                "None of the inputs have requires_grad=True. Gradients will be None",
                rank=0,
                repeated=3,
            )
        if w.tqdm:
            pending.append(tqdm_line(done, total, wall - start_wall, initial))
            if len(pending) >= flush_every[j] or j == len(lines) - 1:
                w.driver("\r" + "\r".join(pending))
                pending = []
    if stopped or not final:
        return
    if at_least(w.version, "0.2"):
        shown: Any = None
        if last_val is not None and last_val == lines[-1][0]:
            shown = _order_val(_val_dict(w.sim.metrics, last_val, w.version), w.sim.metric_order)
        w.driver(pprint.pformat(f"Final validation metrics: {shown}"))


def _restart_block(w: _Writer, sim: SimRun, ckpt: int, total: int) -> None:
    """The second session after a manual restart from the checkpoint at `ckpt`."""
    cfg = sim.config_segments[-1][1]
    w.raw("^C")
    _ray_start(w, "2026-01-15 14:40:09")
    w.pid += 4211
    w.worker_pids = [p + 4211 for p in w.worker_pids]
    _startup(w, cfg, True, total)
    folder = f"/root/{get(cfg, 'trainer.default_local_dir')}/global_step_{ckpt}"
    w.driver(f"Load from checkpoint folder: {folder}")
    w.driver(f"Setting global step to {ckpt}")
    w.driver(f"Resuming from {folder}")
