"""Segments of one run joined into one (logscope.stitch, `logscope analyze` without --no-stitch):
a resume split over three console logs, rotated logs, a W&B run resumed twice; and what must
never be joined (a sweep reusing one experiment name)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from logscope.cli import app
from logscope.ingest import load
from logscope.stitch import chains, stitch
from logscope.synthetic import simulate, write_console_log

from ._ingest_writers import write_wandb_offline

runner = CliRunner()
STEP = re.compile(r"step:(\d+) - ")
LR = "actor_rollout_ref.actor.optim.lr"


def _split(path: Path) -> tuple[list[str], dict[int, str]]:
    """(lines before the first step line, {step: its line}) of a simulated console log."""
    head: list[str] = []
    steps: dict[int, str] = {}
    for line in path.read_text().splitlines(keepends=True):
        m = STEP.search(line)
        if m:
            steps[int(m.group(1))] = line
        elif not steps:
            head.append(line)
    return head, steps


def _analyze(*args: str) -> dict:
    result = runner.invoke(app, ["analyze", *args, "-f", "json", "--fail-on", "never"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def resumed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One run of 400 steps written as three logs: steps 1–130, a resume from the checkpoint
    at step 100 with a new learning rate (101–260, other values at the repeated steps), and a
    resume at 250 (251–400)."""
    root = tmp_path_factory.mktemp("resumed")
    first = write_console_log(simulate(400, "grpo", seed=3), root / "full.log")
    again = simulate(400, "grpo", seed=4, config={LR: 2e-6})
    second = write_console_log(again, root / "full2.log")
    head1, steps1 = _split(first)
    head2, steps2 = _split(second)
    pieces = [
        ("seg1.log", head1, [steps1[s] for s in range(1, 131)]),
        ("seg2.log", head2, [steps2[s] for s in range(101, 131)]
         + [steps1[s] for s in range(131, 261)]),
        ("seg3.log", head2, [steps1[s] for s in range(251, 401)]),
    ]  # fmt: skip
    folder = root / "run"
    folder.mkdir()
    for name, head, lines in pieces:
        (folder / name).write_text("".join(head + lines))
    first.unlink()
    second.unlink()
    return folder


def test_a_resume_over_three_logs_is_one_run(resumed: Path, tmp_path: Path) -> None:
    runs = [r for p in sorted(resumed.glob("*.log")) for r in load(p)]
    (chain,) = chains(runs)
    assert [Path(r.source.path).name for r in chain] == ["seg1.log", "seg2.log", "seg3.log"]
    run = stitch(chain)
    assert run.n_steps == 400 and int(run.steps[0]) == 1 and int(run.steps[-1]) == 400
    assert len(run.config_segments) == 3  # every segment's config, the resume's lr among them
    assert [run.config_value(LR, step=s) for s in (50, 200, 300)] == [1e-6, 2e-6, 2e-6]
    # repeated steps 101–130: the resumed segment's values
    seg2 = chain[1]
    for metric in ("critic/score/mean", "actor/entropy"):
        steps, values = run.series(metric)
        s2, v2 = seg2.series(metric)
        assert values[list(steps).index(120)] == v2[list(s2).index(120)]
    segments = run.meta["segments"]
    assert [s["steps_kept"] for s in segments] == [[1, 100], [101, 250], [251, 400]]
    assert segments[1]["first_line"] == chain[0].parse_stats.lines_read + 1
    assert run.parse_stats.lines_read == sum(r.parse_stats.lines_read for r in chain)

    data = _analyze(str(resumed), "--store", str(tmp_path / "s"))
    assert data["run"]["steps"]["count"] == 400  # one run: a report, not a fleet
    assert len(data["run"]["config_segments"]) == 3
    assert [Path(s["path"]).name for s in data["run"]["meta"]["segments"]] == [
        "seg1.log",
        "seg2.log",
        "seg3.log",
    ]
    text = runner.invoke(app, ["analyze", str(resumed), "--store", str(tmp_path / "s")]).stdout
    assert "segments" in text and "seg2.log (steps 101–260" in " ".join(text.split())
    apart = _analyze(str(resumed), "--store", str(tmp_path / "s"), "--no-stitch")
    assert apart["summary"]["runs"] == 3


def test_a_pooled_fleet_joins_segments_from_the_store(
    resumed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pool workers send stored runs without their metrics: the parent reads them back to
    stitch, and the joined report is the one of runs read in this process."""
    from logscope import fleet

    monkeypatch.setattr(fleet, "POOL_MIN_ENTRIES", 2)
    entries = [(str(p), None) for p in sorted(resumed.glob("*.log"))]
    pooled = fleet.analyze_all(entries, jobs=2, store_dir=tmp_path / "store")
    here = fleet.analyze_all(entries, jobs=1, use_cache=False)
    assert len(pooled) == len(here) == 1
    assert pooled[0].to_dict() == here[0].to_dict()
    assert pooled[0].run.n_steps == 400


def test_a_sweep_reusing_one_experiment_name_is_not_joined(tmp_path: Path) -> None:
    """Runs that each start at step 1 under verl's default names are separate runs."""
    for seed in (1, 2):
        write_console_log(simulate(150, "grpo", seed=seed), tmp_path / f"sweep{seed}.log")
    runs = [r for p in sorted(tmp_path.glob("*.log")) for r in load(p)]
    assert runs[0].meta["experiment"] == runs[1].meta["experiment"]
    assert chains(runs) == []
    assert _analyze(str(tmp_path), "--store", str(tmp_path / "s"))["summary"]["runs"] == 2


def test_rotated_logs_are_joined_oldest_first(tmp_path: Path) -> None:
    full = write_console_log(simulate(300, "grpo", seed=5), tmp_path / "x.log")
    head, steps = _split(full)
    full.unlink()
    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "verl.log.2").write_text("".join(head + [steps[s] for s in range(1, 101)]))
    (folder / "verl.log.1").write_text("".join(steps[s] for s in range(101, 201)))
    (folder / "verl.log").write_text("".join(steps[s] for s in range(201, 301)))
    data = _analyze(str(folder), "--store", str(tmp_path / "s"))
    assert data["run"]["steps"]["count"] == 300
    assert [Path(s["path"]).name for s in data["run"]["meta"]["segments"]] == [
        "verl.log.2",
        "verl.log.1",
        "verl.log",
    ]
    assert data["run"]["config_segments"], "the config of the oldest file"


@pytest.mark.slow
def test_a_wandb_run_resumed_twice_is_one_run(tmp_path: Path) -> None:
    """The real wandb SDK, offline: one run id, resumed twice with overlapping steps and a new
    learning rate at each resume."""
    pytest.importorskip("wandb")
    wandb_dir = tmp_path / "wb"
    spans = [(1, 100), (90, 200), (190, 300)]
    for n, (lo, hi) in enumerate(spans):
        rows = [
            (s, {"critic/score/mean": 0.01 * s + n, "actor/entropy": 1.0 - 0.001 * s})
            for s in range(lo, hi + 1)
        ]
        config = {"actor_rollout_ref": {"actor": {"optim": {"lr": 1e-6 * (n + 1)}}}}
        write_wandb_offline(
            wandb_dir, rows, config=config, project="p", name="resumed-exp", run_id="abc123xy"
        )
    data = _analyze(str(wandb_dir / "wandb"), "--store", str(tmp_path / "s"))
    run = data["run"]
    assert run["steps"] == {"count": 300, "first": 1, "last": 300}
    assert len(run["meta"]["segments"]) == 3
    assert [s["steps_kept"] for s in run["meta"]["segments"]] == [[1, 89], [90, 189], [190, 300]]
    assert len(run["config_segments"]) == 3


# ---- multi-node runs: per-node folders ---------------------------------------------------------
ROOT = Path(__file__).resolve().parents[1]


def _nodes(tmp_path: Path, head_steps: bool = True) -> Path:
    """A crash log split as a 2-node run leaves it: node0 holds the trainer's step lines, node1
    only the worker's OOM traceback."""
    lines = (ROOT / "fixtures" / "diagnoses" / "LS010.log").read_text().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if "OutOfMemoryError" in line)
    for node, part in (("node0", lines[:cut]), ("node1", lines[cut:])):
        (tmp_path / "exp" / node).mkdir(parents=True)
        (tmp_path / "exp" / node / f"{node}.log").write_text("".join(part))
    return tmp_path


def test_per_node_folders_are_one_run_with_the_workers_crash(tmp_path: Path) -> None:
    whole = _analyze(str(ROOT / "fixtures" / "diagnoses" / "LS010.log"), "--no-cache")
    joined = _analyze(str(_nodes(tmp_path)), "--no-cache")
    nodes = joined["run"]["meta"]["nodes"]
    assert [(Path(n["path"]).parent.name, n["role"]) for n in nodes] == [
        ("node0", "head"),
        ("node1", "worker"),
    ]
    found = [(f["name"], f["step"]) for f in joined["findings"]]
    assert found == [(f["name"], f["step"]) for f in whole["findings"]]
    assert ("cuda-oom", 30) in found


def test_no_stitch_keeps_each_node_a_run(tmp_path: Path) -> None:
    fleet = _analyze(str(_nodes(tmp_path)), "--no-cache", "--no-stitch")
    assert len(fleet["reports"]) == 2


def test_nodes_that_all_log_steps_are_separate_runs(tmp_path: Path) -> None:
    log = ROOT / "fixtures" / "diagnoses" / "LS010.log"
    for node in ("node0", "node1"):
        (tmp_path / "exp" / node).mkdir(parents=True)
        (tmp_path / "exp" / node / "train.log").write_text(log.read_text())
    assert len(_analyze(str(tmp_path), "--no-cache")["reports"]) == 2
