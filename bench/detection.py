"""Detection quality: recall, step error and false alarms per diagnosis, beside rldoctor's recall.

Generates simulated verl runs with one injected pathology each (known kind and step) and
healthy runs, writes each as a verl console log in a chosen print format, reads it back with
logscope's reader and analyses it. The same runs are exported to TensorBoard (TensorBoard's own
writer) for the peer tool `rldoctor`, whose recall is printed beside ours.

    python bench/detection.py                 # 20 runs per pathology, 30 healthy, both sets
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
    sys.path[0] = str(Path(__file__).resolve().parent.parent)  # `bench` importable, not bench/*

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
    "train-inference-mismatch": True,
    "async-imbalance": True,
    "staleness-high": True,
    "dynamic-sampling-waste": True,
    "aborted-responses": True,
}
# Injected kind → the finding name that reports it, when it is not the same.
EXPECTED_NAME = {"nan-loss": "non-finite-metric"}
PPO_ONLY = {"critic-value-error"}
GRPO_ONLY = {"advantage-collapse", "dynamic-sampling-waste"}
# Kinds of the metric families verl 0.6-0.10 added: simulated on verl 0.9/0.10 with the family
# switched on (`family_overrides`); a quarter of healthy runs log every family too.
FAMILY_KINDS: dict[str, dict[str, object]] = {
    "train-inference-mismatch": {"mismatch": True},
    "async-imbalance": {"fully_async": True},
    "staleness-high": {"fully_async": True},
    "dynamic-sampling-waste": {"filter_groups": True},
    "aborted-responses": {"agent_loop": True},
}
FAMILY_VERSIONS = ("0.9", "0.10")
ALL_FAMILIES = {
    "rollout_corr": "decoupled",
    "fully_async": True,
    "filter_groups": True,
    "agent_loop": True,
}
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


# Print formats of the realistic set (verl 0.2-0.9).
REALISTIC_VERSIONS = ("0.2", "0.3", "0.4", "0.5", "0.7", "0.8", "0.9")
# Where an injection goes, as a share of the run (ppo-kl-too-low: while a decaying LR is still
# high; in the tail of a schedule a small ppo_kl is what the schedule asks for).
WINDOW = {"ppo-kl-too-low": (0.15, 0.3)}


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
    realistic: bool = False
    test_freq: int = 10
    families: dict[str, object] = field(default_factory=dict)  # `family_overrides` arguments


@dataclass
class Outcome:
    case: Case
    detected: bool
    step_error: int | None
    warnings_plus: list[str] = field(default_factory=list)
    rldoctor: bool | None = None
    rldoctor_alarms: list[str] = field(default_factory=list)
    seconds: float = 0.0
    # realistic runs: the dynamics drawn (for --show-misses)
    dynamics: str = ""


def make_cases(
    per_kind: int, healthy: int, max_steps: int, seed: int, realistic: bool = False
) -> list[Case]:
    """The tame set (`realistic=False`, 100..max_steps) or the realistic one (20..max_steps,
    verl 0.2-0.9, validation every 5-50 steps)."""
    from logscope.synthetic import not_applicable

    rng = np.random.default_rng([seed, 1] if realistic else seed)
    cases = []
    shortest = 20 if realistic else 100

    def draw(kind: str | None, i: int) -> Case:
        n = int(math.exp(rng.uniform(math.log(shortest), math.log(max_steps))))
        if kind in PPO_ONLY:
            algo = "ppo"
        elif kind in GRPO_ONLY:
            algo = "grpo"
        else:
            algo = str(rng.choice(["grpo", "ppo"]))
        lo, hi = WINDOW.get(kind or "", (0.25, 0.65)) if realistic else (0.25, 0.65)
        step = int(rng.uniform(lo, hi) * n)
        versions = REALISTIC_VERSIONS if realistic else VERSIONS
        test_freq = int(rng.choice([5, 10, 20, 50])) if realistic else 10
        if realistic and kind is not None:  # room for the pathology to show
            n = max(n, 80)
            step = max(int(lo * n), min(step, n - 30), 15)
            test_freq = min(test_freq, max(5, n // 10))
            if kind == "validation-drop":  # the turn needs 4+ validations before it
                test_freq = min(test_freq, max(5, step // 5))
        version = str(rng.choice(versions))
        while kind is not None and not_applicable(kind, algo, version):
            version = str(rng.choice(versions))  # e.g. no memory metrics before verl 0.3
        families: dict[str, object] = {}
        if kind in FAMILY_KINDS or (kind is None and i % 4 == 3):
            version = str(rng.choice(FAMILY_VERSIONS))
            families = dict(FAMILY_KINDS.get(kind or "", ALL_FAMILIES))
            if kind == "train-inference-mismatch" and rng.random() < 0.5:
                families["rollout_corr"] = str(rng.choice(["decoupled", "bypass"]))
        return Case(
            kind=kind,
            seed=int(rng.integers(0, 2**31)),
            n_steps=n,
            algorithm=algo,
            version=version,
            noise=float(rng.uniform(0.7, 1.4)),
            step=step if realistic else max(step, 30),
            magnitude=float(rng.uniform(0.8, 2.0)),
            realistic=realistic,
            test_freq=test_freq,
            families=families,
        )

    for kind in KINDS:
        cases += [draw(kind, i) for i in range(per_kind)]
    cases += [draw(None, i) for i in range(healthy)]
    return cases


def simulate_case(case: Case):
    """The simulated run of a case (realistic dynamics drawn from the case's seed)."""
    import dataclasses

    from logscope.synthetic import Injection, realistic, simulate
    from logscope.synthetic.config import family_overrides

    inject = [] if case.kind is None else [Injection(case.kind, case.step, case.magnitude)]
    dynamics, config = None, {}
    if case.realistic:
        dynamics, config = realistic(
            np.random.default_rng([case.seed, 7]), case.n_steps, case.algorithm
        )
        resume = dynamics.resume_step
        if resume is not None and case.kind is not None:
            # a resume before the pathology shows; none with a restart or crash of its own
            clash = case.kind in ("kl-coef-changed-midrun", "cuda-oom")
            save_freq = int(config.get("trainer.save_freq", 10))
            late_enough = case.step > 2 * save_freq + 2
            resume = max(case.step // 2, save_freq + 1) if late_enough and not clash else None
            dynamics = dataclasses.replace(dynamics, resume_step=resume)
        if case.kind is not None and dynamics.critic_warmup > case.step - 10:
            # the actor (and what it logs) must be updating for a while before the pathology
            dynamics = dataclasses.replace(dynamics, critic_warmup=max(0, case.step - 10))
        if case.kind == "ppo-kl-too-low" and dynamics.on_policy:
            # with one update per step ppo_kl is noise around 0: there is no update size to judge
            dynamics = dataclasses.replace(dynamics, on_policy=False)
            mini = int(config["data.train_batch_size"]) // 4
            config["actor_rollout_ref.actor.ppo_mini_batch_size"] = mini
        if case.kind == "validation-drop" and dynamics.val_size < 100:
            # a 30-prompt set moves ±0.09 per validation: a 0.1 drop is not identifiable there
            dynamics = dataclasses.replace(dynamics, val_size=100)
    if case.families:
        config = {**config, **family_overrides(**case.families)}  # type: ignore[arg-type]
    return simulate(
        n_steps=case.n_steps,
        algorithm=case.algorithm,
        seed=case.seed,
        noise=case.noise,
        inject=inject,
        version=case.version,
        config=config,
        dynamics=dynamics,
        test_freq=case.test_freq,
    )


def _write_tensorboard(sim, folder: Path) -> None:
    """The run as TensorBoard event files, written by TensorBoard's own EventFileWriter."""
    from logscope.synthetic.framework_formats import write_tensorboard

    write_tensorboard(sim.to_run(), folder)


def evaluate(case: Case, with_rldoctor: bool) -> Outcome:
    from logscope.analyze import analyze_run
    from logscope.ingest import load
    from logscope.synthetic import write_console_log

    t0 = time.perf_counter()
    sim = simulate_case(case)
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "verl.log"
        write_console_log(sim, log, version=case.version)
        (run,) = load(log)
        report = analyze_run(run)
        outcome = Outcome(case, detected=False, step_error=None)
        outcome.warnings_plus = sorted(
            {f.name for f in report.findings if f.severity != "info" and not _config_lint(f)}
        )
        if case.kind is not None:
            truth = sim.truth[0].step
            wanted = EXPECTED_NAME.get(case.kind, case.kind)
            hits = [f for f in report.findings if f.name == wanted]
            outcome.detected = bool(hits)
            located = [abs(f.step - truth) for f in hits if f.step is not None]
            outcome.step_error = min(located) if located else None
        if with_rldoctor and not case.realistic:
            outcome.rldoctor, outcome.rldoctor_alarms = _rldoctor(sim, case, Path(tmp))
    if case.realistic:
        d = sim.dynamics
        outcome.dynamics = (
            f"lr={d.lr_schedule} grow={d.length_growth:.1f} on_policy={d.on_policy} "
            f"critic_warmup={d.critic_warmup} resume={d.resume_step} ds={d.dynamic_sampling} "
            f"val={d.val_size} df={d.tail_df:.1f} phi={d.noise_phi:.2f}"
        )
    outcome.seconds = time.perf_counter() - t0
    return outcome


def _config_lint(finding) -> bool:
    """Config-lint findings (LS5xx) judge the launch, not the run's dynamics."""
    return finding.is_config


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


def _table(rows: list[dict], alarms: dict, peer: bool) -> list[str]:
    def pct(x: float | None) -> str:
        return "n/a" if x is None else f"{x:.2f}"

    head = "| diagnosis | runs | recall | median step error |"
    rule = "|---|---|---|---|"
    if peer:
        head, rule = head + " rldoctor recall |", rule + "---|"
    lines = [head, rule]
    for r in rows:
        err = "run-level" if r["median_step_error"] is None else f"{r['median_step_error']:g}"
        line = f"| `{r['diagnosis']}` | {r['runs']} | {pct(r['recall'])} | {err} |"
        lines.append(line + (f" {pct(r['rldoctor_recall'])} |" if peer else ""))
    found = ", ".join(alarms["warning_plus_findings"]) or "none"
    text = (
        f"Healthy runs: {alarms['healthy_runs']}; with a warning-or-higher finding "
        f"(config lint aside): {alarms['runs_with_warning_plus']} ({found})"
    )
    if peer:
        text += f"; rldoctor warnings on the same healthy runs: {alarms['rldoctor_runs_with_warning_plus']}"
    return [*lines, "", text + "."]


def to_markdown(
    sets: dict[str, tuple[list[dict], dict]], args: argparse.Namespace, seconds: float
) -> str:
    lines = [
        "# Detection quality",
        "",
        f"Measured by `python bench/detection.py --per-kind {args.per_kind} --healthy {args.healthy} "
        f"--max-steps {args.max_steps} --seed {args.seed} --framework-runs {args.framework_runs}` on {time.strftime('%Y-%m-%d')} "
        f"({os.cpu_count()} cores, {seconds:.0f} s). Runs are simulated by `logscope.synthetic` with one "
        "injected pathology each, or none (healthy), written as verl console logs and read back by "
        "logscope's reader.",
    ]
    if "tame" in sets:
        lines += [
            "",
            "## Tame set",
            "",
            f"The simulator's tame dynamics (near-Gaussian noise, constant LR, smooth trends): "
            f"100–{args.max_steps} steps, noise ×0.7–1.4, magnitude ×0.8–2.0, GRPO and PPO, verl "
            f"print formats {', '.join(VERSIONS)}. rldoctor reads the same runs from TensorBoard "
            "event files; `n/a` means it has no check for that diagnosis.",
            "",
            *_table(*sets["tame"], peer=not args.no_rldoctor),
        ]
    if "realistic" in sets:
        lines += [
            "",
            "## Realistic set",
            "",
            "Dynamics of real runs drawn by `logscope.synthetic.realistic` (see its docstring): "
            "Student-t, autocorrelated noise; LR warm-up and cosine/linear decay; response length "
            "growing up to 4× with truncation rising; entropy falling then plateauing; KL to the "
            "reference growing like √t; checkpoint and validation steps; resumes; DAPO dynamic "
            "sampling; memory warm-up and allocator sawtooth; PPO critic warm-up; on-policy runs; "
            f"validation sets of 30–1319 prompts. 20–{args.max_steps} steps (pathological runs ≥ 80), "
            f"verl print formats {', '.join(REALISTIC_VERSIONS)}, noise ×0.7–1.4, magnitude ×0.8–2.0. "
            "The metric families of verl 0.6–0.10 (training–inference mismatch, fully-async, DAPO "
            f"filter, agent loop) are logged on verl {'/'.join(FAMILY_VERSIONS)} runs of their "
            "pathologies and on a quarter of the healthy runs (all families). "
            "`ppo-kl-too-low` is injected at 15–30 % of the run (while a decaying LR is still high), "
            "`validation-drop` on validation sets of ≥ 100 prompts; the rest at 25–65 %.",
            "",
            *_table(*sets["realistic"], peer=False),
        ]
    lines += [
        "",
        "How to read it: *recall* is the share of runs with the injected pathology where logscope "
        "reported the diagnosis of that name; *median step error* is the median over those runs of "
        "|reported step − injected step| (the injected step is where the effect first shows in the "
        "metrics); `reward-plateau` is a verdict on the end of the run, so its step is reported but "
        "not scored (`--show-misses` lists its errors). A healthy run is a run with nothing "
        "injected; info-level findings (a converged run's plateau, config advice) and config-lint "
        "findings (LS5xx, which judge the launch) are not alarms. rldoctor 0.2.0 ran with its "
        "default detectors; it gives no step, so only its recall is shown. All numbers are on "
        "simulated runs; real logs are judged by `tests/test_real_logs.py`.",
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
    parser.add_argument(
        "--set",
        choices=("tame", "realistic", "both"),
        default="both",
        help="which runs to simulate",
    )
    parser.add_argument("--only", help="only this diagnosis (and the healthy runs)")
    parser.add_argument("--no-rldoctor", action="store_true", help="skip the peer comparison")
    parser.add_argument("--markdown", type=Path, help="also write the table to this file")
    parser.add_argument("--show-misses", action="store_true")
    parser.add_argument(
        "--framework-runs",
        type=int,
        default=8,
        help="runs per pathology and framework in the per-framework table (0: no table)",
    )
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
            args.no_rldoctor = True

    names = ("tame", "realistic") if args.set == "both" else (args.set,)
    cases = {
        name: [
            c
            for c in make_cases(
                args.per_kind, args.healthy, args.max_steps, args.seed, name == "realistic"
            )
            if args.only is None or c.kind in (None, args.only)
        ]
        for name in names
    }
    everything = [c for name in names for c in cases[name]]
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        outcomes = list(pool.map(evaluate, everything, [with_peer] * len(everything), chunksize=2))
    seconds = time.perf_counter() - t0
    sets = {
        name: summarise([o for o in outcomes if o.case.realistic == (name == "realistic")])
        for name in names
    }
    text = to_markdown(sets, args, seconds)
    framework_ok = True
    if args.framework_runs:
        from bench import frameworks

        t1 = time.perf_counter()
        results = frameworks.run(
            args.framework_runs,
            args.framework_runs + 2,
            min(args.max_steps, 2000),
            args.seed,
            args.workers,
        )
        text += "\n" + frameworks.section(results, args.framework_runs, time.perf_counter() - t1)
        framework_ok = frameworks.passed(results)
    print(text)
    if args.show_misses:
        for o in outcomes:
            c = o.case
            where = "realistic" if c.realistic else "tame"
            if c.kind and (not o.detected or (o.step_error or 0) > 5):
                print(
                    f"miss/late [{where}] {c.kind} step={c.step} err={o.step_error} n={c.n_steps} "
                    f"{c.algorithm} v{c.version} noise={c.noise:.2f} mag={c.magnitude:.2f} "
                    f"seed={c.seed} {o.dynamics}"
                )
            if c.kind is None and o.warnings_plus:
                print(
                    f"false alarm [{where}] {o.warnings_plus} n={c.n_steps} {c.algorithm} "
                    f"v{c.version} noise={c.noise:.2f} seed={c.seed} {o.dynamics}"
                )
    if args.markdown:
        args.markdown.write_text(text)
    ok = True
    for rows, alarms in sets.values():
        ok = ok and all(r["recall"] >= 0.95 for r in rows) and alarms["runs_with_warning_plus"] == 0
        ok = ok and all(r["median_step_error"] is None or r["median_step_error"] <= 5 for r in rows)
    return 0 if ok and framework_ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
