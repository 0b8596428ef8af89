"""Detection quality: recall, step error and false alarms per diagnosis, beside rldoctor's recall.

Generates simulated verl runs with one injected pathology each (known kind and step) and
healthy runs, writes each as a verl console log in a chosen print format, reads it back with
logscope's reader and analyses it. The same runs are exported to TensorBoard (TensorBoard's own
writer) for the peer tool `rldoctor`, whose recall is printed beside ours.

    python bench/detection.py                 # 20 runs per pathology, 30 healthy (default)
    python bench/detection.py --per-kind 5 --healthy 10 --max-steps 1000   # quick look
    python bench/detection.py --markdown docs/detection.md
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

# Run as a script, this folder is sys.path[0]; keep its modules from shadowing packages
# (bench/tensorboard.py vs the tensorboard package).
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)

# Diagnoses under test, and whether they are located at a step (reward-plateau is a tail-of-run
# verdict: its step is reported but not scored).
KINDS: dict[str, bool] = {
    "kl-jump": True,
    "kl-out-of-band": True,
    "reward-sawtooth": True,
    "clip-ratio-spike": True,
    "memory-leak": True,
    "grad-norm-spike": True,
    "entropy-collapse": True,
    "response-length-collapse": True,
    "rollout-bottleneck": True,
    "throughput-drop": True,
    "critic-value-error": True,
    "advantage-collapse": True,
    "ppo-kl-too-low": True,
    "reward-plateau": False,
    "validation-drop": True,
}
# Injected kind → the finding name that reports it, when it is not the same.
EXPECTED_NAME = {"nan-loss": "non-finite-metric"}
PPO_ONLY = {"critic-value-error"}
GRPO_ONLY = {"advantage-collapse"}
# Print formats exercised (repr era, .3f era, actor/perf era, numpy-wrapper era).
VERSIONS = ("0.4", "0.5", "0.8", "0.9")

# rldoctor's detector that corresponds to each diagnosis (None: it has no such check).
RLDOCTOR = {
    "kl-jump": "kl_drift",
    "kl-out-of-band": "kl_drift",
    "clip-ratio-spike": "clip_saturation",
    "grad-norm-spike": "gradient_pathology",
    "entropy-collapse": "entropy_collapse",
    "response-length-collapse": "length_pathology",
    "advantage-collapse": "advantage_collapse",
    "reward-plateau": "plateau",
}


@dataclass
class Case:
    kind: str | None  # None = healthy
    seed: int
    n_steps: int
    algorithm: str
    version: str
    noise: float
    step: int
    magnitude: float


@dataclass
class Outcome:
    case: Case
    detected: bool
    step_error: int | None
    warnings_plus: list[str] = field(default_factory=list)
    rldoctor: bool | None = None
    rldoctor_alarms: list[str] = field(default_factory=list)
    seconds: float = 0.0


def make_cases(per_kind: int, healthy: int, max_steps: int, seed: int) -> list[Case]:
    rng = np.random.default_rng(seed)
    cases = []

    def draw(kind: str | None, i: int) -> Case:
        n = int(math.exp(rng.uniform(math.log(100), math.log(max_steps))))
        if kind in PPO_ONLY:
            algo = "ppo"
        elif kind in GRPO_ONLY:
            algo = "grpo"
        else:
            algo = str(rng.choice(["grpo", "ppo"]))
        step = int(rng.uniform(0.25, 0.65) * n)
        return Case(
            kind=kind,
            seed=int(rng.integers(0, 2**31)),
            n_steps=n,
            algorithm=algo,
            version=str(rng.choice(VERSIONS)),
            noise=float(rng.uniform(0.7, 1.4)),
            step=max(step, 30),
            magnitude=float(rng.uniform(0.8, 2.0)),
        )

    for kind in KINDS:
        cases += [draw(kind, i) for i in range(per_kind)]
    cases += [draw(None, i) for i in range(healthy)]
    return cases


def _write_tensorboard(sim, folder: Path) -> None:
    """The run as TensorBoard event files, written by TensorBoard's own EventFileWriter."""
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(folder))
    wide = sim.metrics.pivot(on="metric", index="step", values="value").sort("step")
    names = [c for c in wide.columns if c != "step"]
    for row in wide.iter_rows():
        step, values = row[0], row[1:]
        summary = summary_pb2.Summary(
            value=[
                summary_pb2.Summary.Value(tag=name, simple_value=float(v))
                for name, v in zip(names, values, strict=True)
                if v is not None
            ]
        )
        writer.add_event(event_pb2.Event(step=int(step), wall_time=time.time(), summary=summary))
    writer.close()


def evaluate(case: Case, with_rldoctor: bool) -> Outcome:
    from logscope.analyze import analyze_run
    from logscope.ingest import load
    from logscope.synthetic import Injection, simulate, write_console_log

    t0 = time.perf_counter()
    inject = [] if case.kind is None else [Injection(case.kind, case.step, case.magnitude)]
    sim = simulate(
        n_steps=case.n_steps,
        algorithm=case.algorithm,
        seed=case.seed,
        noise=case.noise,
        inject=inject,
        version=case.version,
    )
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "verl.log"
        write_console_log(sim, log, version=case.version)
        (run,) = load(log)
        report = analyze_run(run)
        outcome = Outcome(case, detected=False, step_error=None)
        outcome.warnings_plus = sorted({f.name for f in report.findings if f.severity != "info"})
        if case.kind is not None:
            truth = sim.truth[0].step
            wanted = EXPECTED_NAME.get(case.kind, case.kind)
            hits = [f for f in report.findings if f.name == wanted]
            outcome.detected = bool(hits)
            located = [abs(f.step - truth) for f in hits if f.step is not None]
            outcome.step_error = min(located) if located else None
        if with_rldoctor:
            outcome.rldoctor, outcome.rldoctor_alarms = _rldoctor(sim, case, Path(tmp))
    outcome.seconds = time.perf_counter() - t0
    return outcome


def _rldoctor(sim, case: Case, tmp: Path) -> tuple[bool | None, list[str]]:
    import contextlib
    import io

    from rl_doctor import diagnose, load_run
    from rl_doctor.detectors.base import Severity

    tb = tmp / "tb"
    _write_tensorboard(sim, tb)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        diagnosis = diagnose(load_run(str(tb)))
    fired = {f.detector for f in diagnosis.findings if f.severity >= Severity.INFO}
    alarms = sorted(f.detector for f in diagnosis.findings if f.severity >= Severity.WARNING)
    if case.kind is None:
        return None, alarms
    mapped = RLDOCTOR.get(case.kind)
    return (mapped in fired) if mapped else None, alarms


def summarise(outcomes: list[Outcome]) -> tuple[list[dict], dict]:
    rows = []
    for kind, located in KINDS.items():
        mine = [o for o in outcomes if o.case.kind == kind]
        if not mine:
            continue
        errors = [o.step_error for o in mine if o.step_error is not None]
        peer = [o.rldoctor for o in mine if o.rldoctor is not None]
        rows.append(
            {
                "diagnosis": kind,
                "runs": len(mine),
                "recall": sum(o.detected for o in mine) / len(mine),
                "median_step_error": statistics.median(errors) if (errors and located) else None,
                "rldoctor_recall": (sum(peer) / len(peer)) if peer else None,
            }
        )
    healthy = [o for o in outcomes if o.case.kind is None]
    alarms = {
        "healthy_runs": len(healthy),
        "runs_with_warning_plus": sum(bool(o.warnings_plus) for o in healthy),
        "warning_plus_findings": sorted({n for o in healthy for n in o.warnings_plus}),
        "rldoctor_runs_with_warning_plus": sum(bool(o.rldoctor_alarms) for o in healthy),
    }
    return rows, alarms


def to_markdown(rows: list[dict], alarms: dict, args: argparse.Namespace, seconds: float) -> str:
    def pct(x: float | None) -> str:
        return "n/a" if x is None else f"{x:.2f}"

    lines = [
        "# Detection quality",
        "",
        f"Measured by `python bench/detection.py --per-kind {args.per_kind} --healthy {args.healthy} "
        f"--max-steps {args.max_steps} --seed {args.seed}` on {time.strftime('%Y-%m-%d')} "
        f"({os.cpu_count()} cores, {seconds:.0f} s). Runs are simulated by `logscope.synthetic` with one "
        f"injected pathology each (100–{args.max_steps} steps, noise ×0.7–1.4, magnitude ×0.8–2.0, "
        f"GRPO and PPO, verl print formats {', '.join(VERSIONS)}), written as verl console logs and read "
        "back by logscope's reader. rldoctor reads the same runs from TensorBoard event files; "
        "`n/a` means it has no check for that diagnosis.",
        "",
        "| diagnosis | runs | recall | median step error | rldoctor recall |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        err = "run-level" if r["median_step_error"] is None else f"{r['median_step_error']:g}"
        lines.append(
            f"| `{r['diagnosis']}` | {r['runs']} | {pct(r['recall'])} | {err} | {pct(r['rldoctor_recall'])} |"
        )
    lines += [
        "",
        f"Healthy runs: {alarms['healthy_runs']}; with a warning-or-higher finding: "
        f"{alarms['runs_with_warning_plus']} ({', '.join(alarms['warning_plus_findings']) or 'none'}); "
        f"rldoctor warnings on the same healthy runs: {alarms['rldoctor_runs_with_warning_plus']}.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--per-kind", type=int, default=20)
    parser.add_argument("--healthy", type=int, default=30)
    parser.add_argument("--max-steps", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--no-rldoctor", action="store_true", help="skip the peer comparison")
    parser.add_argument("--markdown", type=Path, help="also write the table to this file")
    parser.add_argument("--show-misses", action="store_true")
    args = parser.parse_args(argv)

    with_peer = not args.no_rldoctor
    if with_peer:
        try:
            import rl_doctor  # noqa: F401
        except ImportError:
            print(
                "rldoctor is not installed (pip install rldoctor tbparse); skipping the peer",
                file=sys.stderr,
            )
            with_peer = False

    cases = make_cases(args.per_kind, args.healthy, args.max_steps, args.seed)
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        outcomes = list(pool.map(evaluate, cases, [with_peer] * len(cases), chunksize=2))
    seconds = time.perf_counter() - t0
    rows, alarms = summarise(outcomes)
    text = to_markdown(rows, alarms, args, seconds)
    print(text)
    if args.show_misses:
        for o in outcomes:
            c = o.case
            if c.kind and (not o.detected or (o.step_error or 0) > 5):
                print(
                    f"miss/late {c.kind} step={c.step} err={o.step_error} n={c.n_steps} {c.algorithm} v{c.version} noise={c.noise:.2f} mag={c.magnitude:.2f} seed={c.seed}"
                )
            if c.kind is None and o.warnings_plus:
                print(
                    f"false alarm {o.warnings_plus} n={c.n_steps} {c.algorithm} v{c.version} noise={c.noise:.2f} seed={c.seed}"
                )
    if args.markdown:
        args.markdown.write_text(text)
    ok = all(r["recall"] >= 0.95 for r in rows) and alarms["runs_with_warning_plus"] == 0
    ok = ok and all(r["median_step_error"] is None or r["median_step_error"] <= 5 for r in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
