"""Generate logscope/data/verl_schema.json: the key tree of verl's trainer configs, per release.

For every verl release on PyPI, the wheel's trainer configs are read with OmegaConf (the YAML
dialect and interpolations Hydra uses): `verl/trainer/config/_generated_ppo*_trainer.yaml` (the
config Hydra composes, flattened by verl itself; 0.5.0 and later), else `ppo_trainer.yaml` and
`ppo_megatron_trainer.yaml` (flat files with no `defaults:` list before 0.5). Every leaf is
recorded with its value type (int, float, bool, str, list, dict, null; `any` for `???` or an
interpolation that does not resolve); a key that holds a non-empty mapping is a node, not a leaf.

The data is deduplicated across versions: each key maps to spans
`[first_version, last_version, type, trainers]` over the ordered release list, where `trainers`
holds the one-letter codes of the trainer configs that have the key with that type.

    pip install omegaconf                                   # the generator's only extra need
    python scripts/gen_verl_schema.py --wheels ~/.cache/verl-wheels     # download, regenerate
    python scripts/gen_verl_schema.py --wheels DIR --check  # offline: regenerate from DIR, compare

Without `--check`, missing wheels are fetched with `pip download verl==X --no-deps -d DIR` and
the release list comes from `pip index versions verl` (or `--versions`). `--check` reads only
the wheels already in DIR and the release list recorded in the data file, and exits 1 when the
regenerated data differs from the committed file.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "logscope" / "data" / "verl_schema.json"
CONFIG_DIR = "verl/trainer/config/"
TRAINER_CODES = {
    "ppo_trainer": "p",
    "ppo_megatron_trainer": "m",
    "ppo_torchtitan_trainer": "t",
    "ppo_veomni_trainer": "v",
}
_GENERATED = re.compile(r"_generated_(ppo_\w*trainer)\.yaml")
_HEADER = re.compile(r"--cfg job ([^'\n]*)")
_LEGACY = ("ppo_trainer", "ppo_megatron_trainer")


def pypi_versions() -> list[str]:
    """verl's releases, as `pip index versions verl` lists them."""
    out = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", "verl"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    match = re.search(r"Available versions:\s*(.+)", out)
    if not match:
        raise SystemExit("pip index versions verl: no version list in its output")
    return [v.strip() for v in match.group(1).split(",") if v.strip()]


def wheel_path(wheels: Path, version: str) -> Path | None:
    """The wheel of `version` in `wheels` (file names normalise versions like `0.2` → `0.2`)."""
    for path in sorted(wheels.glob("verl-*.whl")):
        if Version(path.name.split("-")[1]) == Version(version):
            return path
    return None


def download(wheels: Path, version: str) -> Path:
    """The wheel of `version`, fetched with pip when it is not in `wheels` yet."""
    found = wheel_path(wheels, version)
    if found is None:
        pip = [sys.executable, "-m", "pip", "download", f"verl=={version}", "--no-deps", "-q"]
        subprocess.run([*pip, "-d", str(wheels)], check=True)
        found = wheel_path(wheels, version)
    if found is None:
        raise SystemExit(f"pip download verl=={version}: no wheel in {wheels}")
    return found


def trainer_configs(wheel: Path) -> dict[str, str]:
    """{trainer name: YAML text} of the PPO trainer configs a wheel ships."""
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        generated = {
            m.group(1): n
            for n in names
            if n.startswith(CONFIG_DIR) and (m := _GENERATED.fullmatch(n[len(CONFIG_DIR) :]))
        }
        if not generated:
            generated = {
                t: f"{CONFIG_DIR}{t}.yaml" for t in _LEGACY if f"{CONFIG_DIR}{t}.yaml" in names
            }
        return {t: zf.read(n).decode("utf-8") for t, n in sorted(generated.items())}


def choices(text: str) -> list[str]:
    """The config-group choices a generated config was flattened with (`model_engine=veomni`),
    from the `print_cfg.py --cfg job …` command in its header."""
    match = _HEADER.search(text[:2000])
    return (
        [w for w in match.group(1).split() if "=" in w and not w.startswith("-")] if match else []
    )


def groups(wheel: Path) -> dict[str, str]:
    """{config group: default option} from the defaults list of the wheel's `ppo_trainer.yaml`
    (`model_engine: dp`, `actor: ${model_engine}_actor` …): `group=option` on a command line
    chooses an option, it is not a config key."""
    import yaml

    with zipfile.ZipFile(wheel) as zf:
        try:
            primary = yaml.safe_load(zf.read(f"{CONFIG_DIR}ppo_trainer.yaml")) or {}
        except KeyError:
            return {}
    out = {}
    for item in primary.get("defaults") or []:
        if isinstance(item, dict):
            for name, option in item.items():
                out[str(name).removeprefix("override ").split("@")[0].strip()] = str(option)
    return dict(sorted(out.items()))


def leaves(text: str) -> dict[str, str]:
    """{dotted key: value type} of every leaf of a trainer config."""
    from omegaconf import OmegaConf

    cfg = OmegaConf.create(text)
    for key in ("defaults", "hydra"):
        cfg.pop(key, None)
    return dict(_walk(cfg, ""))


def _walk(node: Any, prefix: str) -> Iterator[tuple[str, str]]:
    from omegaconf import DictConfig, OmegaConf

    for key in node:
        dotted = f"{prefix}{key}"
        if OmegaConf.is_missing(node, key):
            yield dotted, "any"
            continue
        try:
            value = node[key]  # resolves `${…}` interpolations
        except Exception:  # an interpolation that needs the runtime (env, custom resolver)
            yield dotted, "any"
            continue
        if isinstance(value, DictConfig) and len(value) > 0:
            yield from _walk(value, dotted + ".")
        else:
            yield dotted, _type_name(value)


def _type_name(value: Any) -> str:
    from omegaconf import DictConfig, ListConfig

    if value is None:
        return "null"
    if isinstance(value, DictConfig):
        return "dict"
    if isinstance(value, ListConfig):
        return "list"
    for kind in (bool, int, float, str):  # bool before int: True is an int too
        if isinstance(value, kind):
            return kind.__name__
    return "any"


def schema(
    per_version: dict[str, dict[str, dict[str, str]]],
    trainer_choices: dict[str, set[str]],
    group_names: dict[str, dict[str, str]],
) -> dict[str, Any]:
    """The data file's content from {version: {trainer: {key: type}}} (versions in order), the
    group choices each trainer config was generated with, and {version: config groups}."""
    versions = list(per_version)
    trainers = sorted({t for configs in per_version.values() for t in configs}, key=_trainer_order)
    codes = {t: TRAINER_CODES.get(t) or t[4] for t in trainers}
    keys: dict[str, list[list[str]]] = {}
    for key in sorted({k for c in per_version.values() for leaf in c.values() for k in leaf}):
        keys[key] = _spans(key, versions, per_version, codes)
    return {
        "about": "verl's trainer config keys per release, from the wheels on PyPI. Generated by "
        "scripts/gen_verl_schema.py; don't edit. keys: {dotted key: [[first version, last "
        "version, value type, trainer codes]]}; choices: the config-group choices each trainer "
        "config was flattened with; groups: {config group: [[first, last, default option]]}",
        "versions": versions,
        "trainers": {codes[t]: t for t in trainers},
        "choices": {codes[t]: sorted(trainer_choices.get(t, ())) for t in trainers},
        "groups": {
            g: _group_spans(g, versions, group_names)
            for g in sorted({g for names in group_names.values() for g in names})
        },
        "keys": keys,
    }


def _trainer_order(name: str) -> tuple[int, str]:
    order = list(TRAINER_CODES)
    return (order.index(name) if name in order else len(order), name)


def _group_spans(
    group: str, versions: list[str], names: dict[str, dict[str, str]]
) -> list[list[str]]:
    """[[first, last, default option]] of the releases whose primary config has `group`."""
    spans: list[list[str]] = []
    for i, version in enumerate(versions):
        option = names.get(version, {}).get(group)
        if option is None:
            continue
        if spans and spans[-1][1] == versions[i - 1] and spans[-1][2] == option:
            spans[-1][1] = version
        else:
            spans.append([version, version, option])
    return spans


def _spans(
    key: str,
    versions: list[str],
    per_version: dict[str, dict[str, dict[str, str]]],
    codes: dict[str, str],
) -> list[list[str]]:
    """Maximal runs of consecutive versions where `key` has one (type, trainer set)."""
    spans: list[list[str]] = []
    open_: dict[tuple[str, str], list[str]] = {}
    for version in versions:
        by_type: dict[str, str] = {}
        for trainer, leaf in per_version[version].items():
            if key in leaf:
                by_type[leaf[key]] = by_type.get(leaf[key], "") + codes[trainer]
        current = {(kind, "".join(sorted(t))) for kind, t in by_type.items()}
        for combo in list(open_):
            if combo not in current:
                spans.append(open_.pop(combo))
        for kind, trainer_set in sorted(current):
            if (kind, trainer_set) in open_:
                open_[(kind, trainer_set)][1] = version
            else:
                open_[(kind, trainer_set)] = [version, version, kind, trainer_set]
    spans.extend(open_.values())
    return sorted(spans, key=lambda s: (versions.index(s[0]), s[2], s[3]))


def generate(wheels: Path, versions: list[str], fetch: bool) -> dict[str, Any]:
    """The schema of `versions` (any order), from the wheels in `wheels`."""
    per_version: dict[str, dict[str, dict[str, str]]] = {}
    trainer_choices: dict[str, set[str]] = {}
    group_names: dict[str, dict[str, str]] = {}
    for version in sorted(versions, key=Version):
        wheel = download(wheels, version) if fetch else wheel_path(wheels, version)
        if wheel is None:
            raise SystemExit(f"no wheel of verl {version} in {wheels} (run without --check)")
        configs = trainer_configs(wheel)
        if configs:
            per_version[version] = {t: leaves(text) for t, text in configs.items()}
            group_names[version] = groups(wheel)
            for trainer, text in configs.items():
                trainer_choices.setdefault(trainer, set()).update(choices(text))
    return schema(per_version, trainer_choices, group_names)


def render(data: dict[str, Any]) -> str:
    """JSON with one key per line, so diffs between generations stay readable."""
    head = {k: v for k, v in data.items() if k != "keys"}
    lines = ["{"]
    lines += [
        f"  {json.dumps(k)}: {json.dumps(v, separators=(', ', ': '))}," for k, v in head.items()
    ]
    lines.append('  "keys": {')
    items = list(data["keys"].items())
    for i, (key, spans) in enumerate(items):
        comma = "," if i < len(items) - 1 else ""
        lines.append(f"    {json.dumps(key)}: {json.dumps(spans, separators=(',', ':'))}{comma}")
    lines += ["  }", "}"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheels", type=Path, required=True, help="folder of verl wheels")
    parser.add_argument("--versions", nargs="*", help="releases (default: all on PyPI)")
    parser.add_argument("--check", action="store_true", help="offline; exit 1 if stale")
    parser.add_argument("--output", type=Path, default=OUT)
    args = parser.parse_args(argv)
    if args.check:
        recorded = json.loads(args.output.read_text(encoding="utf-8"))["versions"]
        text = render(generate(args.wheels, args.versions or recorded, fetch=False))
        if text != args.output.read_text(encoding="utf-8"):
            print(f"{args.output} is stale: run scripts/gen_verl_schema.py", file=sys.stderr)
            return 1
        return 0
    args.wheels.mkdir(parents=True, exist_ok=True)
    text = render(generate(args.wheels, args.versions or pypi_versions(), fetch=True))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text, encoding="utf-8")
    print(f"wrote {args.output} ({len(text) // 1024} KiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
