"""`logscope check`: lint a verl launch command, script, YAML config or log before (or after) a run.

    check_command(argv)   a command line (`python3 -m verl.trainer.main_ppo k=v …`)
    check_text(text)      a launch script's text
    check_path(path)      a script, a YAML config, or a log (its config dumps)

Each returns one `Report` per verl command / config (kind "check"). The rules are the config-lint
detectors (`logscope.detectors.config_lint`, LS501–LS516), the same ones `analyze` runs on a log.
`fixed_overrides(report)` gives the overrides with every suggested value applied, for `--fix`.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

from logscope import verl_config
from logscope.check import hydra, shell
from logscope.exceptions import ConfigParseError, LogscopeError
from logscope.model import ConfigSegment, Finding, Run, Source
from logscope.report import Report

__all__ = [
    "check_command",
    "check_path",
    "check_text",
    "check_yaml",
    "fix_text",
    "fixed_overrides",
    "lint_run",
    "run_from_config",
]

YAML_SUFFIXES = (".yaml", ".yml")
SCRIPT_SUFFIXES = (".sh", ".bash", ".zsh")


class NoVerlCommand(ConfigParseError):
    """A script or command line with no verl trainer call in it."""


_LOG_HINT = re.compile(r"^(?:\(\w+ pid=\d+[^)]*\)\s*)?(?:step:\d+ - |\{'actor_rollout_ref')", re.M)


def config_rules() -> list[Any]:
    """One instance of every config-lint detector, by code."""
    from logscope.detectors.config_lint import ConfigRule
    from logscope.detectors.registry import detector_classes

    return [cls() for cls in detector_classes() if issubclass(cls, ConfigRule)]


def lint_run(run: Run) -> Report:
    """The config rules on one Run (a command, a YAML, or a log's config segments)."""
    from logscope.analyze import run_detectors

    findings, skipped, errors = run_detectors(run, config_rules())
    return Report(run=run, findings=findings, skipped=skipped, errors=errors, kind="check")


def run_from_config(
    user_config: dict[str, Any],
    *,
    kind: str,
    path: str,
    run_id: str,
    version: str | None = None,
    meta: dict[str, Any] | None = None,
    deleted: list[str] | None = None,
) -> Run:
    """A Run for a config that has not run: verl's defaults + the user's values, resolved.

    `deleted`: keys removed with `~key` (they lose verl's default too).
    """
    explicit = sorted(hydra.explicit_keys(user_config))
    config = hydra.merge(hydra.defaults_config(version), user_config)
    for key in deleted or []:
        hydra.delete_key(config, key)
    hydra.resolve_interpolations(config)
    info: dict[str, Any] = {
        "verl_version": version,
        "algorithm": verl_config.get(config, "algorithm.adv_estimator"),
        "explicit_keys": explicit,
    }
    info.update(meta or {})
    return Run(
        id=run_id,
        source=Source(kind, path),
        meta=info,
        config_segments=[ConfigSegment(0, config)],
    )


# ---- commands and scripts ----------------------------------------------------------------------


def _report_for(
    command: shell.VerlCommand,
    path: str,
    version: str | None,
    base: dict[str, Any] | None = None,
    base_is_local: bool = False,
) -> Report:
    args = hydra.parse_args(command.args, path=f"{path}:{command.line}" if path else None)
    user = hydra.apply(base or {}, args.overrides)
    meta = {
        "entry": command.entry,
        "line": command.line,
        "command": {
            "env": command.env,
            "prefix": command.prefix,
            "args": command.args,
        },
        "hydra_flags": args.flags,
        "passthrough_args": args.passthrough,
    }
    run_id = f"{Path(path).name}:{command.line}" if path != "<command>" else command.entry
    deleted = [o.key for o in args.overrides if o.op == "delete"]
    run = run_from_config(
        user,
        kind="verl-command",
        path=path,
        run_id=run_id,
        version=version,
        meta=meta,
        deleted=deleted,
    )
    notes = run.parse_stats.notes
    symbolic = [o.raw for o in args.overrides if _is_symbolic(o.value)]
    if symbolic:
        notes.append(
            "left symbolic (unset shell variables), so rules reading them are skipped: "
            + ", ".join(symbolic)
        )
    if args.passthrough:
        notes.append("arguments passed through unseen: " + " ".join(args.passthrough))
    if args.config_name:
        notes.append(
            f"--config-name {args.config_name}: "
            + (
                "read from the local file"
                if base_is_local
                else "not a local file; verl's defaults used"
            )
        )
    return lint_run(run)


_SHELL_VAR = re.compile(r"\$(?:[A-Za-z_]\w*|\{[A-Za-z_]\w*(?:[:=+?-][^}]*)?\}|[@*#?\d])")


def _is_symbolic(value: Any) -> bool:
    """A value with an unexpanded shell variable (not an OmegaConf `${a.b}` interpolation)."""
    if isinstance(value, str):
        return bool(_SHELL_VAR.search(value))
    if isinstance(value, list):
        return any(_is_symbolic(v) for v in value)
    return False


def check_command(
    argv: list[str], *, version: str | None = None, env: dict[str, str] | None = None
) -> list[Report]:
    """Lint one command line given as argv (as a shell already split it)."""
    if not argv:
        raise ConfigParseError(
            "empty command: expected python3 -m verl.trainer.main_ppo key=value …"
        )
    if len(argv) == 1 and any(c in argv[0] for c in " \n"):
        return check_text(argv[0], path="<command>", version=version, env=env)
    command = shell.find_verl(shell.Command(argv=list(argv), env={}, line=1))
    if command is None:
        raise NoVerlCommand(
            "no verl trainer in the command (expected e.g. python3 -m verl.trainer.main_ppo)",
            token=" ".join(argv[:4]),
        )
    return [_report_for(command, "<command>", version)]


def check_text(
    text: str,
    *,
    path: str = "<script>",
    version: str | None = None,
    env: dict[str, str] | None = None,
    base_dir: Path | None = None,
) -> list[Report]:
    """Lint every verl command in a launch script's text."""
    commands = shell.verl_commands(text, env=env, path=path)
    if not commands:
        raise NoVerlCommand(
            "no verl trainer command found (looked for python -m verl.trainer.main_ppo, recipe "
            "mains, torchrun/ray job submit wrappers)",
            path=path,
        )
    reports = []
    for command in commands:
        base, local = _config_from_flags(command, base_dir)
        reports.append(_report_for(command, path, version, base, local))
    return reports


def _config_from_flags(
    command: shell.VerlCommand, base_dir: Path | None
) -> tuple[dict[str, Any] | None, bool]:
    """(base config, read from a local file) for --config-path/--config-name.

    The user's own YAML when it is a local file; for verl's megatron config, its strategy.
    """
    try:
        args = hydra.parse_args(command.args)
    except ConfigParseError:
        return None, False  # reported when the command itself is parsed
    name, where = args.config_name, args.config_path
    builtin = None
    if name and "megatron" in name:  # verl's ppo_megatron_trainer: the batch checks differ
        builtin = {"actor_rollout_ref": {"actor": {"strategy": "megatron"}}}
    if not name or not where or "$" in where or base_dir is None:
        return builtin, False
    folder = Path(where) if Path(where).is_absolute() else base_dir / where
    for candidate in (folder / name, folder / f"{name}.yaml", folder / f"{name}.yml"):
        if candidate.is_file():
            return load_yaml_config(candidate), True
    return builtin, False


# ---- YAML --------------------------------------------------------------------------------------


def load_yaml_config(path: Path) -> dict[str, Any]:
    """A verl trainer YAML or override file as a nested dict (Hydra's `defaults`/`hydra` dropped)."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise ConfigParseError(
            f"not valid YAML: {getattr(exc, 'problem', exc)}", path=f"{path}{line}"
        ) from None
    except OSError as exc:
        raise ConfigParseError(f"cannot read: {exc.strerror}", path=str(path)) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigParseError(
            f"expected a mapping of config keys at the top level, got {type(data).__name__}",
            path=str(path),
        )
    data = {k: v for k, v in data.items() if k not in ("defaults", "hydra")}
    return hydra.from_dotted(data)


def check_yaml(path: str | Path, *, version: str | None = None) -> list[Report]:
    """Lint a verl trainer config or a user's override YAML."""
    p = Path(path)
    user = load_yaml_config(p)
    run = run_from_config(user, kind="verl-yaml", path=str(p), run_id=p.name, version=version)
    return [lint_run(run)]


# ---- logs and dispatch -------------------------------------------------------------------------


def check_log(path: str | Path) -> list[Report]:
    """Lint the config dump(s) of a log (changes between segments included)."""
    from logscope.check.rules import changed_keys
    from logscope.ingest import load

    reports = []
    for run in load(path):
        if not run.config_segments:
            raise LogscopeError(f"{path}: the log has no verl config dump to check")
        segments = run.config_segments
        for before, after in itertools.pairwise(segments):
            keys = changed_keys(before.config, after.config)
            if keys:
                run.parse_stats.notes.append(
                    f"config changed at the restart at step {after.first_step}: " + ", ".join(keys)
                )
        reports.append(lint_run(run))
    return reports


def check_path(
    path: str | Path, *, version: str | None = None, env: dict[str, str] | None = None
) -> list[Report]:
    """Lint a launch script, a YAML config, or a log, by what the file is."""
    p = Path(path)
    if not p.exists():
        raise ConfigParseError("no such file", path=str(p))
    if p.is_dir():
        return check_log(p)
    if p.suffix.lower() in YAML_SUFFIXES:
        return check_yaml(p, version=version)
    try:
        text = p.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ConfigParseError(f"cannot read: {exc.strerror}", path=str(p)) from None
    is_script = p.suffix.lower() in SCRIPT_SUFFIXES
    if not is_script and _LOG_HINT.search(text[:2_000_000]):
        return check_log(p)
    try:
        return check_text(text, path=str(p), version=version, env=env, base_dir=p.parent)
    except ConfigParseError as exc:
        if is_script or not isinstance(exc, NoVerlCommand):
            raise
    # Not a launch script: maybe a log in another format (JSONL, W&B export …).
    from logscope.exceptions import IngestError

    try:
        return check_log(p)
    except IngestError:
        raise ConfigParseError(
            "neither a launch script with a verl trainer command, a YAML config, nor a log "
            "logscope reads",
            path=str(p),
        ) from None


# ---- --fix -------------------------------------------------------------------------------------


def suggested_overrides(findings: list[Finding]) -> dict[str, str]:
    """{key: override} advised by `findings` (the most severe finding's advice wins a key)."""
    from logscope.model import SEVERITY_RANK

    chosen: dict[str, str] = {}
    for finding in sorted(findings, key=lambda f: -SEVERITY_RANK[f.severity]):
        for advice in finding.advice:
            key = _override_key(advice.override) if advice.override else None
            if key is not None and key not in chosen:
                chosen[key] = advice.override  # type: ignore[assignment]
    return chosen


def _override_key(text: str) -> str | None:
    try:
        return hydra.parse_override(text).key.split("@", 1)[0]
    except ConfigParseError:
        return None


def _relint(run: Run, fixes: list[str]) -> Report:
    """Lint the run's (last) config with `fixes` applied."""
    overrides = [hydra.parse_override(f) for f in fixes]
    config = hydra.apply(run.config(), overrides)
    meta = dict(run.meta)
    if meta.get("explicit_keys") is not None:
        meta["explicit_keys"] = sorted(set(meta["explicit_keys"]) | {o.key for o in overrides})
    fixed = Run(id=run.id, source=run.source, meta=meta, config_segments=[ConfigSegment(0, config)])
    return lint_run(fixed)


def fixed_overrides(report: Report, rounds: int = 5) -> list[str]:
    """The run's overrides with every suggested value applied (in place, or appended).

    Fixes can interact (a new train batch changes which mini batch divides it), so the fixed
    config is linted again and new advice applied, up to `rounds` times.
    """
    applied: dict[str, str] = {}
    findings = report.findings
    for _ in range(rounds):
        fresh = {k: v for k, v in suggested_overrides(findings).items() if applied.get(k) != v}
        if not fresh:
            break
        applied.update(fresh)
        findings = _relint(report.run, list(applied.values())).findings
    command = report.run.meta.get("command")
    original: list[str] = list(command["args"]) if command else []
    out: list[str] = []
    for arg in original:
        key = _override_key(arg) if not arg.startswith("-") else None
        if key is not None and key in applied:
            out.append(applied.pop(key))
        else:
            out.append(arg)
    out.extend(applied.values())
    return out


def fix_text(report: Report) -> str:
    """`--fix` output: the full command with fixes (a command/script), else the override list."""
    command = report.run.meta.get("command")
    overrides = fixed_overrides(report)
    if not command:
        return "\n".join(overrides)
    env = [f"{k}={shell.quote(v)}" for k, v in command["env"].items()]
    head = " ".join([*env, shell.join_command(command["prefix"])])
    lines = [head] + [f"    {shell.quote(a)}" for a in overrides]
    return " \\\n".join(lines)
