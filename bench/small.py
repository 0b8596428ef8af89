"""Small runs stay fast: `logscope analyze` of a 200-step log in a fresh process, vs the 0.x
baseline measured in the same run.

    python bench/small.py [--repeat 9] [--steps 200] [--baseline 5e7740b]

The log is a generated verl console log (logscope.synthetic, as bench/analyze.py makes them).
The baseline is the tree of commit BASELINE (`git archive`, extracted once into the bench work
folder, with this tree's compiled tokenizer copied in so both read logs the same way). Each
repetition runs, interleaved, the baseline's and this tree's
`python -m logscope analyze LOG --format json -o FILE` in fresh processes:

- cold: an empty store (read, every detector, write the store);
- cached: a store that already holds the log (a re-analysis of an unchanged file: the default
  store makes every second `analyze` of a file this one).

Medians of wall and CPU time, the ratio to the baseline, and the floor every command pays
(`python -c pass`, `python -c "import polars"`). The reports of both trees must be identical,
but for fields added to the report since the baseline (listed; their values are new, not
changed). Target: ≤ 0.4 s wall (median, fresh process).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

if __package__ in (None, ""):
    sys.path[:] = [
        p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent
    ]
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import ROOT, Results, command_line, console_log_in_child, run_child, workdir

BASELINE = "5e7740b"
TARGET_S = 0.4
MODES = ("cold", "cached")


def baseline_tree(commit: str) -> Path:
    """The files of `commit`, extracted once (the repository is only read)."""
    folder = workdir("small", f"baseline-{commit}")
    if (folder / "logscope" / "__init__.py").exists():
        return folder
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", commit],
        check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(folder, filter="data")
    for built in (ROOT / "logscope" / "ingest").glob("_items*.so"):
        shutil.copy2(built, folder / "logscope" / "ingest" / built.name)
    # the installed package maps logscope.detectors / logscope.app to its own tree: point the
    # baseline's at its own copies
    for name in ("detectors", "app"):
        link = folder / "logscope" / name
        if not link.exists():
            link.symlink_to(Path("..") / name)
    return folder


def analyze_once(tree: Path, log: Path, store: Path, out: Path) -> tuple[float, float]:
    """(wall s, CPU s) of one `logscope analyze` of `log` by the code in `tree`."""
    cmd = [sys.executable, "-m", "logscope", "analyze", str(log), "--format", "json"]
    cmd += ["--store", str(store), "--output", str(out), "--fail-on", "never"]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    wall, cpu, _, code = run_child(cmd, stdout=subprocess.DEVNULL, cwd=tree, env=env)
    if code != 0:
        raise RuntimeError(f"{tree}: logscope analyze exited {code}")
    return wall, cpu


def added_fields(base: object, now: object, where: str = "") -> list[str] | None:
    """Paths of the keys `now` has and `base` lacks; None when anything else differs."""
    if isinstance(base, dict) and isinstance(now, dict):
        if not set(base) <= set(now):
            return None
        out = [f"{where}.{k}".lstrip(".") for k in now if k not in base]
        for k in base:
            inner = added_fields(base[k], now[k], f"{where}.{k}")
            if inner is None:
                return None
            out += inner
        return out
    if isinstance(base, list) and isinstance(now, list) and len(base) == len(now):
        out = []
        for i, (b, n) in enumerate(zip(base, now, strict=True)):
            inner = added_fields(b, n, f"{where}[{i}]")
            if inner is None:
                return None
            out += inner
        return out
    return [] if base == now else None


def floor_once(code: str) -> tuple[float, float]:
    wall, cpu, _, _ = run_child([sys.executable, "-c", code], cwd=tempfile.gettempdir())
    return wall, cpu


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--baseline", default=BASELINE, help="commit of the 0.x baseline")
    ap.add_argument("--json", type=Path, default=None, help="write the results here (runner)")
    args = ap.parse_args(argv)
    res = Results("small", command_line())
    log = console_log_in_child(args.steps)
    trees = {"baseline": baseline_tree(args.baseline), "now": ROOT}
    times: dict[tuple[str, str], list[tuple[float, float]]] = {}
    floors: dict[str, list[tuple[float, float]]] = {"python -c pass": [], "import polars": []}
    reports: dict[str, bytes] = {}
    with tempfile.TemporaryDirectory(prefix="logscope-bench-small-") as tmp:
        for label, tree in trees.items():  # the cached stores, and each tree's report
            out = Path(tmp) / f"{label}.json"
            analyze_once(tree, log, Path(tmp) / f"store-{label}", out)
            reports[label] = out.read_bytes()
        for n in range(args.repeat):
            for label, tree in trees.items():
                out = Path(tmp) / "out.json"
                store = Path(tmp) / f"cold-{label}-{n}"
                times.setdefault((label, "cold"), []).append(analyze_once(tree, log, store, out))
                if out.read_bytes() != reports[label]:
                    raise RuntimeError(f"{label}: the cold report differs from the first one")
                store = Path(tmp) / f"store-{label}"
                times.setdefault((label, "cached"), []).append(analyze_once(tree, log, store, out))
                if out.read_bytes() != reports[label]:
                    raise RuntimeError(f"{label}: the cached report differs from the cold one")
            floors["python -c pass"].append(floor_once("pass"))
            floors["import polars"].append(floor_once("import polars"))

    def med(pairs: list[tuple[float, float]], i: int) -> float:
        return statistics.median(p[i] for p in pairs)

    res.say(f"== logscope analyze of a {args.steps}-step log ({log.stat().st_size / 1e3:.0f} kB),")
    res.say(f"   {args.repeat} fresh processes each, interleaved; baseline {args.baseline} ==")
    res.say(f"{'':28s}{'wall s':>9s}{'cpu s':>9s}")
    for (label, mode), pairs in times.items():
        res.say(f"{f'{label}, {mode}':28s}{med(pairs, 0):9.3f}{med(pairs, 1):9.3f}")
    for label, pairs in floors.items():
        res.say(f"{label:28s}{med(pairs, 0):9.3f}{med(pairs, 1):9.3f}")
    added = added_fields(json.loads(reports["baseline"]), json.loads(reports["now"]))
    same = added is not None
    res.say(
        f"reports identical to the baseline's: {same}"
        + (f" (fields added since: {', '.join(sorted(set(added)))})" if added else "")
    )
    for mode in MODES:
        now, base = times[("now", mode)], times[("baseline", mode)]
        res.check(
            f"analyze {args.steps} steps, {mode} store: wall (median, fresh process)",
            med(now, 0),
            "s",
            f"<= {TARGET_S:g} s, report unchanged",
            med(now, 0) <= TARGET_S and same,
            note=f"baseline {med(base, 0):.3f} s, {med(base, 0) / med(now, 0):.2f}x faster; CPU "
            f"{med(now, 1):.3f} s vs {med(base, 1):.3f} s ({med(base, 1) / med(now, 1):.2f}x)",
        )
    res.write(args.json)
    return res.exit_code()


if __name__ == "__main__":
    sys.exit(main())
