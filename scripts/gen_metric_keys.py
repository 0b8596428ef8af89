"""Write tests/data/verl_metric_keys.json: the metric key literals of verl's source, per release.

The ground truth for the metric registry's coverage (`tests/test_metric_registry.py` checks that
every key here is known to `logscope/data/metrics.toml`), so that test runs offline.

For each wheel, the files that produce trainer metrics are parsed with `ast` (never imported):
the metric utilities, rollout correction, debug metrics, the legacy and V1 trainers, the
fully-async and one-step-off recipes, the agent loop, the actor/critic workers, the engine
workers, the engine losses and the policy losses (`SOURCES`). A key is a string constant or an
f-string (each `{...}` becomes `*`) used

- as a key of a dict literal, or as the subscript of an assignment (`metrics["x"] = ...`);
- as the name of a timer (`marked_timer("gen", timing_raw)`, `_timer`, `simple_timer`): it is
  logged as `timing_s/<name>` (`timing/<name>` in verl 0.1);

and kept when it looks like a metric key: at least one `/`, no spaces, not a file path. Worker
metrics the trainer prefixes afterwards (`rename_dict(metrics, "actor/")`) get the prefix here
too (`PREFIXED`). The result maps version → sorted keys.

    python scripts/gen_metric_keys.py --wheels /tmp/verlwheels          # regenerate
    python scripts/gen_metric_keys.py --wheels /tmp/verlwheels --check  # exit 1 when stale

Missing wheels are fetched with `pip download verl==X --no-deps -d DIR` (not with --check).
"""

from __future__ import annotations

import argparse
import ast
import fnmatch
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "data" / "verl_metric_keys.json"
VERSIONS = ("0.1", "0.2.0.post2", "0.3.0.post1", "0.4.1", "0.6.1", "0.8.0", "0.9.1")

#: fnmatch patterns (paths inside the wheel) of the files that produce trainer metrics
SOURCES: tuple[str, ...] = (
    "verl/trainer/ppo/metric_utils.py",
    "verl/trainer/ppo/rollout_corr_helper.py",
    "verl/utils/debug/metrics.py",
    "verl/trainer/ppo/v1/*.py",
    "verl/trainer/ppo/ray_trainer.py",
    "verl/trainer/ppo/core_algos.py",
    "verl/experimental/fully_async_policy/*.py",
    "verl/experimental/fully_async_policy/dynamic_schedule/*.py",
    "verl/experimental/one_step_off_policy/*.py",
    "verl/experimental/agent_loop/*.py",
    "verl/workers/actor/*.py",
    "verl/workers/critic/*.py",
    "verl/workers/fsdp_workers.py",
    "verl/workers/megatron_workers.py",
    "verl/workers/engine_workers.py",
    "verl/workers/utils/losses.py",
    # verl 0.1 kept the workers under the trainer
    "verl/trainer/ppo/actor/*.py",
    "verl/trainer/ppo/critic/*.py",
    "verl/trainer/ppo/workers/*.py",
)

#: (files, prefixes, final): keys of these files that do not start with a `final` prefix are
#: logged under each of `prefixes` (`rename_dict(metrics, "actor/")` for worker outputs, timers
#: of the agent loop printed under `timing_s/`, the fully-async rollouter's status under
#: `fully_async/`)
PREFIXED: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("verl/workers/engine_workers.py", ("actor/", "critic/"), ("actor/", "critic/")),
    ("verl/workers/utils/losses.py", ("actor/",), ("actor/", "critic/")),
    ("verl/experimental/agent_loop/*.py", ("timing_s/",), ("timing_s/",)),
    (
        "verl/experimental/fully_async_policy/*",
        ("fully_async/",),
        ("fully_async/", "timing_s/", "dynamic_resource/", "global_seqlen/", "perf/", "training/"),
    ),
)
#: (start, replacement) for keys a trainer prefixes itself: verl 0.1's validation
RENAMED: tuple[tuple[str, str], ...] = (("test_score/", "val/test_score/"),)
#: parts of keys, not keys: the `<metric>` of `val-core/<data_source>/<var>/<metric>`
FRAGMENTS: tuple[str, ...] = ("best@", "worst@", "maj@", "mean@", "std@")

#: functions whose first argument names a timer (`timing_raw[name]`)
TIMERS = {"marked_timer", "_timer", "simple_timer", "timer"}
#: unprefixed names the engine workers return (the trainer prefixes them with the role)
_WORKER_NAMES = {"loss", "grad_norm", "lr", "kl_loss", "kl_coef", "entropy", "pg_loss"}

_KEY = re.compile(r"^[A-Za-z_*][\w*.@()\-]*(/[\w*.@()\-]+)+$")
_NOT_KEYS = re.compile(r"\.(py|json|yaml|yml|txt|parquet|pt|bin|safetensors)$|^(http|file)")


def render(node: ast.AST) -> str | None:
    """A string constant as is; an f-string with each `{...}` as `*`; else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                parts.append(value.value)
            else:
                parts.append("*")
        return re.sub(r"\*+", "*", "".join(parts))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = render(node.left), render(node.right)
        if left is not None or right is not None:
            return re.sub(r"\*+", "*", (left or "*") + (right or "*"))
    return None


def _call_name(node: ast.Call) -> str:
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return ""


def literals(source: str) -> tuple[set[str], set[str]]:
    """(key-like literals used as dict keys or assignment subscripts, timer names) of a file."""
    tree = ast.parse(source)
    keys: set[str] = set()
    timers: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            keys.update(k for k in map(render, [x for x in node.keys if x is not None]) if k)
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Subscript) and (key := render(target.slice)):
                    keys.add(key)
        elif isinstance(node, ast.Call) and _call_name(node) in TIMERS and node.args:
            name = render(node.args[0])
            if name and " " not in name:
                timers.add(name)
    return keys, timers


def is_key(text: str) -> bool:
    return bool(_KEY.match(text)) and not _NOT_KEYS.search(text) and not text.startswith("*")


def keys_of_wheel(wheel: Path, version: str) -> list[str]:
    """The metric keys verl `version` logs, read from its wheel."""
    timing = "timing/" if version == "0.1" else "timing_s/"
    found: set[str] = set()
    with zipfile.ZipFile(wheel) as zf:
        for name in sorted(zf.namelist()):
            if not any(fnmatch.fnmatchcase(name, p) for p in SOURCES) or "/unittest/" in name:
                continue
            keys, timers = literals(zf.read(name).decode("utf-8"))
            found.update(t if t.startswith(timing) else timing + t for t in timers if t[0] != "*")
            rule = next((r for r in PREFIXED if fnmatch.fnmatchcase(name, r[0])), None)
            for key in keys:
                if key.startswith(FRAGMENTS) or not (is_key(key) or key in _WORKER_NAMES):
                    continue
                for start, new in RENAMED:
                    if key.startswith(start):
                        key = new + key[len(start) :]
                if rule is not None and not key.startswith(rule[2]):
                    found.update(p + key for p in rule[1])
                elif is_key(key):
                    found.add(key)
    return sorted(found)


def wheel_path(wheels: Path, version: str) -> Path | None:
    for path in sorted(wheels.glob(f"verl-{version}-*.whl")):
        return path
    return None


def download(wheels: Path, version: str) -> Path:
    found = wheel_path(wheels, version)
    if found is None:
        pip = [sys.executable, "-m", "pip", "download", f"verl=={version}", "--no-deps", "-q"]
        subprocess.run([*pip, "-d", str(wheels)], check=True)
        found = wheel_path(wheels, version)
    if found is None:
        raise SystemExit(f"no wheel for verl {version} in {wheels}")
    return found


def generate(wheels: Path, versions: tuple[str, ...], fetch: bool) -> dict:
    out: dict = {
        "origin": "scripts/gen_metric_keys.py: ast over the verl wheels from PyPI",
        "sources": list(SOURCES),
        "versions": {},
    }
    for version in versions:
        wheel = download(wheels, version) if fetch else wheel_path(wheels, version)
        if wheel is None:
            raise SystemExit(f"no wheel for verl {version} in {wheels} (--check does not fetch)")
        out["versions"][version] = keys_of_wheel(wheel, version)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheels", type=Path, required=True, help="folder of verl wheels")
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is stale")
    parser.add_argument("--output", type=Path, default=OUT, help=f"default: {OUT}")
    args = parser.parse_args(argv)
    args.wheels.mkdir(parents=True, exist_ok=True)
    data = generate(args.wheels, VERSIONS, fetch=not args.check)
    text = json.dumps(data, indent=1) + "\n"
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.exists() else None
        if current != text:
            print(f"{args.output} is stale: run scripts/gen_metric_keys.py", file=sys.stderr)
            return 1
        print(f"{args.output} is up to date.")
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text, encoding="utf-8")
    counts = ", ".join(f"{v}: {len(k)}" for v, k in data["versions"].items())
    print(f"wrote {args.output} ({counts})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
