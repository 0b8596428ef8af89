"""`tail` on runs longer than its window: window passes between full passes, same end as analyze.

Simulated runs (logscope.synthetic) longer than the window (`tail_window.Plan`) are appended to
the followed file a few steps per cycle; tail's last report must be `analyze`'s on the finished
file, including what only a pass over the whole run finds (a slow memory leak, a reward
plateau). A spike must be alerted by the window pass of the cycle that shows it, no later than a
full pass on every cycle (what tail did before) would alert it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from logscope.analyze import analyze_run
from logscope.ingest import load
from logscope.ingest.console import ConsoleParser
from logscope.model import Source
from logscope.settings import for_input
from logscope.synthetic import Injection, realistic, simulate, write_console_log
from logscope.tail import TailOptions, TailSession
from logscope.tail_window import Plan, cut, look_back

HISTORY = 450  # steps already in the file when tail starts: more than a window

CASES = {
    "leak-spikes-kl": [
        Injection("memory-leak", 500),
        Injection("grad-norm-spike", 600),
        Injection("kl-jump", 760),
    ],
    "plateau-oom": [Injection("reward-plateau", 500), Injection("cuda-oom", 780)],
    "healthy": [],
}


def _log(tmp_path: Path, name: str, inject: list[Injection], steps: int = 800) -> Path:
    path = tmp_path / f"{name}.log"
    if inject:
        sim = simulate(steps, "grpo", seed=11, inject=inject)
    else:  # the dynamics of real runs, nothing injected
        dyn, config = realistic(np.random.default_rng(3), steps, "grpo")
        sim = simulate(steps, "grpo", seed=3, config=config, dynamics=dyn)
    write_console_log(sim, path)
    return path


def _step_ends(data: bytes) -> list[int]:
    """Byte offset just after each step line."""
    ends, pos = [], 0
    for line in data.splitlines(keepends=True):
        pos += len(line)
        if b"step:" in line and b" - " in line:
            ends.append(pos)
    return ends


def _tail_from(src: Path, tmp_path: Path, steps: int) -> tuple[bytes, list[int], Path, TailSession]:
    """A live copy of `src` holding its first `steps` step lines, and a tail session that has
    read it (its first cycle): (the log's bytes, its step ends, the live file, the session)."""
    data = src.read_bytes()
    ends = _step_ends(data)
    live = tmp_path / "live.log"
    live.write_bytes(data[: ends[steps - 1]])
    session = TailSession(live, TailOptions(from_start=True))
    session.cycle()
    return data, ends, live, session


def _keys(report) -> list:
    return sorted((f.name, f.metric, f.step, f.end_step, f.severity) for f in report.findings)


@pytest.mark.parametrize("case", sorted(CASES))
def test_tail_ends_with_analyzes_findings(case: str, tmp_path: Path) -> None:
    src = _log(tmp_path, case, CASES[case])
    data, ends, live, session = _tail_from(src, tmp_path, HISTORY)
    for end in [*ends[HISTORY + 4 :: 5], len(data)]:
        with live.open("ab") as fh:
            fh.write(data[live.stat().st_size : end])
        session.cycle()
    assert session.passes["window"] > 0 and session.last_pass == "window"
    session.close()
    expected = analyze_run(load(src, source="verl-console")[0])
    assert session.last_pass == "full"
    assert _keys(session.report) == _keys(expected)
    found = {f.name for f in expected.findings}
    whole_run = {"memory-leak", "reward-plateau"} & {i.kind for i in CASES[case]}
    assert whole_run <= found
    # what only a full pass can find: their detectors do not run on the window
    assert not {f.code for f in expected.findings if f.name in whole_run} & session.plan.codes


def test_a_spike_is_alerted_by_the_window_pass_of_its_cycle(tmp_path: Path) -> None:
    src = _log(tmp_path, "spike", [Injection("grad-norm-spike", 900)], steps=1000)
    data, ends, live, session = _tail_from(src, tmp_path, 850)
    assert session.passes["full"] == 1
    arrived = None
    for k in range(850, len(ends)):
        with live.open("ab") as fh:
            fh.write(data[ends[k - 1] : ends[k]])
        alerts = session.cycle()
        if any("grad-norm-spike" in str(a.blocks) for a in alerts):
            arrived = k + 1  # steps in the file when it was alerted
            break
    assert arrived is not None, "the spike was never alerted"
    assert session.last_pass == "window" and session.passes["full"] == 1
    spike = [f for f in session.report.findings if f.name == "grad-norm-spike"]
    assert spike and abs(spike[0].step - 900) <= 5
    # a full pass on the step before would not have seen it either: no later than before
    prefix = tmp_path / "prefix.log"
    prefix.write_bytes(data[: ends[arrived - 2]])
    before = analyze_run(load(prefix, source="verl-console")[0])
    assert not [f for f in before.findings if f.name == "grad-norm-spike" and f.step >= 850]


def test_a_new_config_segment_gets_a_full_pass(tmp_path: Path) -> None:
    """A restart that prints its config again: the window cannot tell config changes, the
    whole run is analysed on that cycle."""
    src = _log(tmp_path, "restart", [Injection("kl-coef-changed-midrun", 600)])
    data, ends, live, session = _tail_from(src, tmp_path, HISTORY)
    segments = []
    for end in [*ends[HISTORY::10], len(data)]:
        with live.open("ab") as fh:
            fh.write(data[live.stat().st_size : end])
        session.cycle()
        segments.append((len(session.report.run.config_segments), session.last_pass))
    first_two = next(i for i, (n, _) in enumerate(segments) if n == 2)
    assert segments[first_two][1] == "full"
    assert any(p == "window" for _, p in segments[first_two + 1 :])
    session.close()
    expected = analyze_run(load(src, source="verl-console")[0])
    assert _keys(session.report) == _keys(expected)


@pytest.mark.parametrize("compact_rows", [64, 20_000])
def test_the_cut_run_is_the_whole_run_cut(tmp_path: Path, compact_rows: int) -> None:
    """`to_run(since_step=S)` is the whole Run cut at S, whatever the frames (a restart with a
    new config, steps logged twice, an OOM traceback)."""
    inject = [Injection("kl-coef-changed-midrun", 300), Injection("cuda-oom", 390)]
    src = _log(tmp_path, "cut", inject, steps=400)
    parser = ConsoleParser(compact_rows)
    with src.open(newline="") as fh:
        parser.feed(fh)
    source = Source("verl-console", str(src))
    whole = parser.to_run(source)
    assert len(whole.config_segments) == 2 and whole.events
    for since in (0, 1, 150, 290, 305, 389, int(whole.steps[-1])):
        part = parser.to_run(source, since_step=since)
        expected = cut(whole, since)
        order = ["step", "metric"]
        assert part.metrics.sort(order).equals(expected.metrics.sort(order)), since
        assert part.events == expected.events
        assert part.config_segments == whole.config_segments
        assert part.meta == whole.meta
        assert part.parse_stats == whole.parse_stats
        assert part.metrics.filter(pl.col("step") < since).height == 0


def test_the_window_holds_the_step_local_detectors_and_their_look_back() -> None:
    detectors = for_input("run.log").detectors(None, None)
    plan = Plan.of(detectors)
    by_name = {d.name: d for d in detectors}
    on_window = {d.name for d in plan.detectors}
    assert {"cuda-oom", "non-finite-metric", "kl-jump", "grad-norm-spike"} <= on_window
    # a share of the run, or a config rule: whole-run only
    assert not {"memory-leak", "reward-plateau", "throughput-drop"} & on_window
    assert not {d.name for d in detectors if d.reads == "config"} & on_window
    # every window detector's look-back fits in the margin, the OOM's context before it too
    assert all(look_back(d) <= plan.margin for d in plan.detectors)
    assert plan.margin >= by_name["cuda-oom"].context_before
    assert plan.size >= 2 * plan.margin


def test_a_jsonl_run_longer_than_the_window(tmp_path: Path) -> None:
    """A source read whole (verl's JSONL file logger): the window is cut from the run read, and
    the run ends with analyze's findings too."""
    import json

    inject = [Injection("memory-leak", 300), Injection("grad-norm-spike", 560)]
    sim = simulate(650, "grpo", seed=5, inject=inject)
    by_step: dict[int, dict[str, float]] = {}
    for step, metric, value in sim.metrics.select("step", "metric", "value").iter_rows():
        by_step.setdefault(step, {})[metric] = value
    lines = [json.dumps({"step": s, "data": d}) + "\n" for s, d in sorted(by_step.items())]
    target = tmp_path / "exp1.jsonl"
    target.write_text("".join(lines[:HISTORY]))
    session = TailSession(target, TailOptions(from_start=True))
    alerts = session.cycle()
    for i in range(HISTORY, len(lines), 20):
        with target.open("a") as fh:
            fh.write("".join(lines[i : i + 20]))
        alerts += session.cycle()
    assert session.passes["window"] > 0
    assert any("grad-norm-spike" in str(a.blocks) for a in alerts)
    session.close()
    (run,) = load(target)
    assert _keys(session.report) == _keys(analyze_run(run))
    assert "memory-leak" in {f.name for f in session.report.findings}
