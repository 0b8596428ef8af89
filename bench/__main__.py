"""Run every benchmark in sequence and write docs/performance.md.

    python -m bench                 # the full set (tens of minutes on 2 cores)
    python -m bench --quick         # smaller inputs, a few minutes
    python -m bench --big           # also analyze a 1,000,000-step log (minutes, 2.7 GB)
    python -m bench --only tensorboard,cache --output /tmp/perf.md

Each benchmark is its own script (`python bench/<name>.py --help`), run here in a subprocess,
one at a time (the machine is shared: never two at once). Scripts of this folder that report
`--json` results give the table's pass/fail lines; the others' verdicts are read from their
printed output. The document holds the machine's description, the date and every script's
output.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench._common import BENCH, ROOT, Check, machine

#: bench/dashboard.py's TARGET_S, used when its output does not state the target
DASHBOARD_TARGET_S = 1.0


@dataclass
class Bench:
    name: str
    title: str
    full: list[str]
    quick: list[str]
    json: bool = True  # reports --json results (else: verdict parsed from its output)


BENCHES = [
    Bench("ingest", "Console ingest", ["--steps", "100000"], ["--steps", "20000"], json=False),
    Bench("tensorboard", "TensorBoard reader", ["--steps", "2000"], ["--steps", "1000"]),
    Bench("wandb_offline", "W&B offline reader", ["--steps", "2000"], ["--steps", "500"]),
    Bench(
        "analyze",
        "End-to-end analyze",
        ["--sizes", "10000,100000", "--repeat", "3"],
        ["--sizes", "1000,10000", "--repeat", "3", "--no-detectors"],
    ),
    Bench("small", "Small runs vs the 0.x baseline", ["--repeat", "9"], ["--repeat", "3"]),
    Bench("cache", "Cached re-analysis", ["--steps", "100000"], ["--steps", "10000"]),
    Bench(
        "fleet",
        "Many runs in one command",
        ["--runs", "1000", "--steps", "500", "--loop-sample", "20"],
        ["--runs", "100", "--steps", "500", "--loop-sample", "5"],
    ),
    Bench(
        "tail",
        "Tail mode",
        ["--sessions", "20", "--idle", "20"],
        ["--sessions", "6", "--idle", "8"],
    ),
    Bench(
        "tail_growth",
        "Tail CPU per new step",
        ["--sizes", "1000,10000,100000", "--new", "20"],
        ["--sizes", "1000,10000", "--new", "10"],
    ),
    Bench(
        "big_file",
        "Big console log (--big only)",
        ["--size", "1G"],
        ["--size", "200M"],
        json=False,
    ),
    Bench(
        "dashboard",
        "Dashboard",
        ["--steps", "100000", "--repeats", "3"],
        ["--steps", "20000", "--repeats", "1"],
        json=False,
    ),
    Bench(
        "detection",
        "Detection quality",
        [
            "--per-kind",
            "5",
            "--healthy",
            "10",
            "--max-steps",
            "2000",
            "--no-rldoctor",
            "--framework-runs",
            "3",
        ],
        [
            "--per-kind",
            "2",
            "--healthy",
            "3",
            "--max-steps",
            "500",
            "--no-rldoctor",
            "--framework-runs",
            "1",
        ],
        json=False,
    ),
]


def _parse_ingest(out: str) -> list[Check]:
    m = re.search(r"ratio logscope / per-line Python: ([\d.]+)x", out)
    if not m:
        return [
            Check(
                "ingest",
                "console ingest vs per-line Python",
                None,
                "x",
                ">= 6x",
                False,
                "no ratio in the output",
            )
        ]
    ratio = float(m.group(1))
    mbs = re.search(r"logscope console\.read\s+[\d.]+\s+([\d.]+)", out)
    note = f"{mbs.group(1)} MB/s" if mbs else ""
    return [
        Check(
            "ingest",
            "console ingest vs per-line Python (wall)",
            ratio,
            "x",
            ">= 6x",
            ratio >= 6,
            note,
        )
    ]


def _parse_dashboard(out: str) -> list[Check]:
    # bench/dashboard.py prints its own target ("target: first render of the charts <= 1 s").
    t = re.search(r"target: first render of the charts <= ([\d.]+) s", out)
    target = float(t.group(1)) if t else DASHBOARD_TARGET_S
    m = re.search(r"Metrics page, first render\s+([\d.]+) s", out)
    if not m:
        return [
            Check(
                "dashboard",
                "Metrics page first render",
                None,
                "s",
                f"<= {target:g} s",
                False,
                "no timing in the output",
            )
        ]
    secs = float(m.group(1))
    return [
        Check(
            "dashboard",
            "Metrics page of the run, first render of the charts",
            secs,
            "s",
            f"<= {target:g} s",
            secs <= target,
        )
    ]


def _parse_detection(out: str, code: int) -> list[Check]:
    return [
        Check(
            "detection",
            "detection quality (recall ≥ 95 %, step error ≤ 5, no false alarms; see the table)",
            None,
            "",
            "all rows",
            code == 0,
        )
    ]


def run_bench(b: Bench, quick: bool, big: bool, tmp: Path) -> tuple[str, list[Check], float, int]:
    script = BENCH / f"{b.name}.py"
    args = list(b.quick if quick else b.full)
    if b.name == "analyze" and big:
        args.append("--big")
    out_json = tmp / f"{b.name}.json"
    if b.json:
        args += ["--json", str(out_json)]
    cmd = [sys.executable, str(script), *args]
    print(f"\n### {b.title}: {' '.join(['python', f'bench/{b.name}.py', *args])}", flush=True)
    t = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    secs = time.perf_counter() - t
    out = proc.stdout
    sys.stdout.write(out)
    if proc.returncode not in (0, 1):
        sys.stdout.write(proc.stderr[-3000:])
    checks: list[Check] = []
    if b.json and out_json.exists():
        data = json.loads(out_json.read_text())
        checks = [Check(**c) for c in data["checks"]]
    elif b.name == "ingest":
        checks = _parse_ingest(out)
    elif b.name == "dashboard":
        checks = _parse_dashboard(out)
    elif b.name == "detection":
        checks = _parse_detection(out, proc.returncode)
    if proc.returncode not in (0, 1) and not checks:
        err = proc.stderr.strip().splitlines()[-1:] or ["(no message)"]
        checks = [Check(b.name, f"{b.title} did not run", None, "", "", None, err[0][:200])]
    if proc.returncode not in (0, 1):
        out += "\n[stderr]\n" + proc.stderr[-2000:]
    return out, checks, secs, proc.returncode


def _fmt_value(c: Check) -> str:
    if c.value is None:
        return "—"
    if c.unit == "x":
        return f"{c.value:,.1f}×"
    if c.unit == "%":
        return f"{c.value:.2f} %"
    return f"{c.value:,.2f} {c.unit}".strip()


def _method(b: Bench) -> list[str]:
    """What the bench measures and how: its script's docstring without the usage lines."""
    import ast

    doc = ast.get_docstring(ast.parse((BENCH / f"{b.name}.py").read_text(encoding="utf-8")))
    kept = [line for line in (doc or "").splitlines() if not line.startswith("    python ")]
    text = "\n".join(kept).strip()
    return [text, ""] if text else []


def render(
    sections: list[tuple[Bench, str, list[Check], float, int]],
    info: dict,
    started: str,
    load_after: list[float] | None,
    argv: list[str],
) -> str:
    verdict = {True: "**pass**", False: "**MISS**", None: "n/a"}
    pk = ", ".join(f"{k} {v}" for k, v in info["packages"].items())
    lines = [
        "# Performance",
        "",
        f"Generated by `python -m bench{' ' + ' '.join(argv) if argv else ''}` on {started} (UTC). "
        "Every input is generated by the bench scripts (`logscope.synthetic`, tensorboard's "
        "and wandb's own writers); nothing large is committed. Times are medians of repeated "
        "runs; the machine is shared with other jobs, so **ratios against baselines measured "
        "in the same run** are the numbers to read. Where CPU time is given it is that of the "
        "measured process (all its threads), which other jobs on the machine disturb less "
        "than wall time.",
        "",
        "## Machine",
        "",
        f"- CPU: {info['cpu_model']}, {info['nproc']} logical cores (nproc)",
        f"- Memory: {info['memory_gb']} GiB",
        f"- OS: {info['os']}; Python {info['python']}",
        f"- Packages: {pk}",
        f"- Load average (1, 5, 15 min) at the start: {info['loadavg']}; at the end: {load_after}",
        "",
        "## Targets",
        "",
        "| topic | measurement | value | target | result | note |",
        "|---|---|---|---|---|---|",
    ]
    for _, _, checks, _, _ in sections:
        for c in checks:
            note = c.note.replace("|", "\\|")
            lines.append(
                f"| {c.topic} | {c.what} | {_fmt_value(c)} | {c.target} | {verdict[c.passed]} | {note} |"
            )
    for b, out, _, secs, code in sections:
        lines += [
            "",
            f"## {b.title} (`bench/{b.name}.py`)",
            "",
            *_method(b),
            f"Ran in {secs:.0f} s, exit code {code}.",
            "",
            "```",
            out.rstrip(),
            "```",
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--quick", action="store_true", help="smaller inputs (a few minutes)")
    ap.add_argument("--big", action="store_true", help="analyze 1,000,000 steps too")
    ap.add_argument(
        "--only", default="", help="comma-separated names: " + ",".join(b.name for b in BENCHES)
    )
    ap.add_argument("--output", type=Path, default=ROOT / "docs" / "performance.md")
    args = ap.parse_args(argv)
    only = {s.strip() for s in args.only.split(",") if s.strip()}
    unknown = only - {b.name for b in BENCHES}
    if unknown:
        ap.error(f"--only: unknown benchmark(s) {', '.join(sorted(unknown))}")
    info = machine()
    started = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    sections = []
    with tempfile.TemporaryDirectory(prefix="logscope-bench-run-") as tmp:
        for b in BENCHES:
            if only and b.name not in only:
                continue
            if b.name == "big_file" and not args.big and "big_file" not in only:
                continue
            if not (BENCH / f"{b.name}.py").exists():
                check = Check(
                    b.name,
                    f"{b.title}",
                    None,
                    "",
                    "",
                    None,
                    f"bench/{b.name}.py does not exist yet",
                )
                sections.append((b, "(not run: the script does not exist yet)", [check], 0.0, -1))
                continue
            out, checks, secs, code = run_bench(b, args.quick, args.big, Path(tmp))
            sections.append((b, out, checks, secs, code))
    import os

    load_after = [round(x, 2) for x in os.getloadavg()]
    argv_shown = [a for a in (argv if argv is not None else sys.argv[1:])]
    text = render(sections, info, started, load_after, argv_shown)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text)
    print(f"\nwrote {args.output}")
    summary = [c for _, _, cs, _, _ in sections for c in cs]
    for c in summary:
        print(c.line())
    return 0 if all(c.passed is not False for c in summary) else 1


if __name__ == "__main__":
    sys.exit(main())
