"""`logscope check`: lint a verl launch command, script, YAML config or log before (or after) a run.

    check_command(argv)   a command line (`python3 -m verl.trainer.main_ppo k=v …`)
    check_text(text)      a launch script's text
    check_path(path)      a script, a YAML config, or a log (its config dumps)

Each returns one `Report` per verl command / config (kind "check"). The rules are the detectors
of the registry that read the config (LS501–LS522, `detectors/config_*.py`), the same ones
`analyze` runs on a log.
`--fix`: `plan_fixes(report)` finds the smallest set of advised changes that leaves nothing to
fix; `fix_script` makes them in the script's text in place (`fix_text` without a script).
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from logscope import hydra_overrides, verl_config
from logscope.check import shell
from logscope.detector import Detector
from logscope.exceptions import ConfigParseError, LogscopeError
from logscope.ingest._common import meta_from_config
from logscope.model import SEVERITIES, ConfigSegment, Finding, Run, Source
from logscope.report import Report

__all__ = [
    "check_command",
    "check_path",
    "check_text",
    "check_yaml",
    "fix_reports",
    "fix_script",
    "fix_text",
    "fixed_overrides",
    "fixes_of",
    "lint_run",
    "plan_fixes",
    "run_from_config",
]

YAML_SUFFIXES = (".yaml", ".yml")
SCRIPT_SUFFIXES = (".sh", ".bash", ".zsh")


class NoVerlCommand(ConfigParseError):
    """A script or command line with no verl trainer call in it."""


_LOG_HINT = re.compile(r"^(?:\(\w+ pid=\d+[^)]*\)\s*)?(?:step:\d+ - |\{'actor_rollout_ref')", re.M)


def config_rules(path: str | None = None) -> list[Detector]:
    """The config rules (the registry's detectors that read the config) by code, as the
    settings for `path` select and configure them (`settings.for_input`)."""
    from logscope.settings import for_input

    return [d for d in for_input(path).detectors() if d.reads == "config"]


def lint_run(run: Run) -> Report:
    """The config rules on one Run (a command, a YAML, or a log's config segments)."""
    from logscope.analyze import run_detectors

    path = None if run.source.path.startswith("<") else run.source.path
    findings, skipped, errors = run_detectors(run, config_rules(path))
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
    explicit = sorted(hydra_overrides.explicit_keys(user_config))
    config = hydra_overrides.merge(hydra_overrides.defaults_config(version), user_config)
    for key in deleted or []:
        verl_config.delete_key(config, key)
    hydra_overrides.resolve_interpolations(config)
    info: dict[str, Any] = {
        "verl_version": version,
        "algorithm": meta_from_config(config).get("algorithm"),  # "ppo" for gae, as analyze
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
    args = hydra_overrides.parse_args(command.args, path=f"{path}:{command.line}" if path else None)
    user = hydra_overrides.apply(base or {}, args.overrides)
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
    if base_is_local and base is not None:  # the user's own config file: its keys are theirs
        meta["config_file_keys"] = sorted(hydra_overrides.explicit_keys(base))
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
        args = hydra_overrides.parse_args(command.args)
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
    return hydra_overrides.from_dotted(data)


def check_yaml(path: str | Path, *, version: str | None = None) -> list[Report]:
    """Lint a verl trainer config or a user's override YAML."""
    p = Path(path)
    user = load_yaml_config(p)
    run = run_from_config(user, kind="verl-yaml", path=str(p), run_id=p.name, version=version)
    return [lint_run(run)]


# ---- logs and dispatch -------------------------------------------------------------------------


def check_log(path: str | Path) -> list[Report]:
    """Lint the config dump(s) of a log (changes between segments included)."""
    from logscope.ingest import load

    reports = []
    for run in load(path):
        if not run.config_segments:
            raise LogscopeError(f"{path}: the log has no verl config dump to check")
        segments = run.config_segments
        for before, after in itertools.pairwise(segments):
            keys = verl_config.changed_keys(before.config, after.config)
            if keys:
                run.parse_stats.notes.append(
                    f"config changed at the restart at step {after.first_step}: " + ", ".join(keys)
                )
        reports.append(lint_run(run))
    return reports


def read_script(path: str | Path) -> str:
    """A script's text as `check` reads it (undecodable bytes replaced)."""
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ConfigParseError(f"cannot read: {exc.strerror}", path=str(path)) from None


def check_path(
    path: str | Path, *, version: str | None = None, env: dict[str, str] | None = None
) -> list[Report]:
    """Lint a launch script, a YAML config, or a log, by what the file is."""
    p = Path(path)
    if not p.exists():
        raise ConfigParseError(f"no such file: {p}")
    if p.is_dir():
        return check_log(p)
    if p.suffix.lower() in YAML_SUFFIXES:
        return check_yaml(p, version=version)
    text = read_script(p)
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


@dataclass(frozen=True)
class Fix:
    """One change `--fix` makes: `override` sets (or, `~key`, deletes) `key`.

    `replaces`: a misspelled key, as the user typed it, whose token the override takes over.
    """

    key: str
    override: str
    replaces: str | None = None

    @property
    def deletes(self) -> bool:
        return self.override.startswith("~")


def fixes_of(finding: Finding) -> list[Fix]:
    """The changes a finding's advice asks for; advice that keeps the current value is none."""
    replaces = finding.evidence.get("replaces") if isinstance(finding.evidence, dict) else None
    out = []
    for advice in finding.advice:
        if not advice.override:
            continue
        try:
            ov = hydra_overrides.parse_override(advice.override)
        except ConfigParseError:
            continue
        key = ov.key.split("@", 1)[0]
        typo = replaces if isinstance(replaces, str) and replaces != key else None
        if typo is None:
            if ov.op == "delete" and advice.current is None:
                continue  # nothing to delete
            if ov.op != "delete" and _same(ov.value, advice.current):
                continue
        out.append(Fix(key, advice.override, typo))
    return out


def _same(a: Any, b: Any) -> bool:
    """Equal as config values (`"true"` and True, 16 and 16.0; never True and 1)."""

    def norm(x: Any) -> tuple[str, Any]:
        if isinstance(x, str):
            x = hydra_overrides.convert(x.strip())
        if isinstance(x, bool) or x is None:
            return ("b", x)
        if isinstance(x, (int, float)):
            return ("n", float(x))
        return ("o", x)

    return norm(a) == norm(b)


def plan_fixes(report: Report, rounds: int = 30) -> list[Fix]:
    """The smallest set of changes found that leaves nothing `--fix` could apply.

    Fixes interact (n 5 → 4 can make the train batch a multiple of n; a new mini batch changes
    which micro batch divides it), so a plan applies the advice of the most severe finding that
    has any, lints again, and repeats until no finding has advice to apply (at most `rounds`
    times, stopping on a cycle); then drops, latest first, each change whose removal brings
    back no finding. One plan starts from each finding's advice (so the note `n 5 → 4` may go
    first when it also clears the train-batch warnings); the one leaving the least severe
    findings, then with the fewest changes, wins.
    """
    relint = _relinter(report)
    starts = {(): None}
    starts.update((tuple(fixes_of(f)), None) for f in report.findings if fixes_of(f))
    plans = [_plan_from(relint, start, rounds) for start in starts]
    return min(plans, key=lambda fixes: (_left(relint(tuple(fixes))), len(fixes)))


def _plan_from(
    relint: Callable[[tuple[Fix, ...]], Report], start: tuple[Fix, ...], rounds: int
) -> list[Fix]:
    """The greedy plan (see `plan_fixes`) after the changes `start`, pruned."""
    plan: dict[str, Fix] = {f.key: f for f in start}
    current, seen = relint(start), {(), start}
    for _ in range(rounds):
        step = _next_fixes(current, plan)
        if not step:
            break
        for fix in step:
            earlier = plan.get(fix.key)
            typo = fix.replaces or (earlier.replaces if earlier else None)
            plan[fix.key] = Fix(fix.key, fix.override, typo)
        state = tuple(plan.values())
        if state in seen:
            break  # the rules disagree; stop where we are
        seen.add(state)
        current = relint(state)
    fixes = list(plan.values())
    target = _identities(relint(tuple(fixes)))
    for fix in reversed(list(fixes)):
        trial = tuple(f for f in fixes if f is not fix)
        if _identities(relint(trial)) <= target:
            fixes = list(trial)
    return fixes


def _left(report: Report) -> tuple[int, ...]:
    """How much a plan leaves: findings per severity, most severe first (compared in order)."""
    counts = report.counts()
    return tuple(counts[s] for s in reversed(SEVERITIES))


def _next_fixes(report: Report, plan: dict[str, Fix]) -> list[Fix]:
    """The changes of the most severe finding (report order) that are not applied yet."""
    for finding in report.findings:
        fresh = [f for f in fixes_of(finding) if not _applied(plan.get(f.key), f)]
        if fresh:
            return fresh
    return []


def _applied(earlier: Fix | None, fix: Fix) -> bool:
    return (
        earlier is not None
        and earlier.override == fix.override
        and fix.replaces in (None, earlier.replaces)
    )


def _identities(report: Report) -> set[tuple[Any, ...]]:
    """What a finding is, numbers aside: rule, severity, title, keys advised, fixable or not."""
    return {
        (
            f.code,
            f.severity,
            f.title,
            tuple(sorted(a.parameter for a in f.advice)),
            bool(fixes_of(f)),
        )
        for f in report.findings
    }


def _relinter(report: Report) -> Callable[[tuple[Fix, ...]], Report]:
    """Lint the report's input again with fixes applied, the way `check` would (cached)."""
    cache: dict[tuple[Fix, ...], Report] = {(): report}

    def relint(fixes: tuple[Fix, ...]) -> Report:
        if fixes not in cache:
            cache[fixes] = _lint_with(report, list(fixes))
        return cache[fixes]

    return relint


def _lint_with(report: Report, fixes: list[Fix]) -> Report:
    """The report's input with `fixes`: a command through `_report_for` (so --config-name and
    the user's keys are read as `check` reads them), a YAML reloaded, a log's config edited."""
    run = report.run
    command = run.meta.get("command")
    version = run.meta.get("verl_version")
    path = run.source.path or ""
    if run.source.kind == "verl-command" and command:
        args = _edit_args(list(command["args"]), fixes)
        prefix = list(command["prefix"])
        verl = shell.VerlCommand(
            prefix + args,
            str(run.meta.get("entry")),
            prefix,
            args,
            dict(command["env"]),
            int(run.meta.get("line") or 1),
        )
        base_dir = Path(path).parent if Path(path).is_file() else None
        base, local = _config_from_flags(verl, base_dir)
        return _report_for(verl, path, version, base, local)
    if run.source.kind == "verl-yaml" and Path(path).is_file():
        user = load_yaml_config(Path(path))
        overrides = [hydra_overrides.parse_override(f"~{f.replaces}") for f in fixes if f.replaces]
        overrides += [hydra_overrides.parse_override(f.override) for f in fixes]
        deleted = [o.key for o in overrides if o.op == "delete"]
        user = hydra_overrides.apply(user, overrides)
        fixed = run_from_config(
            user, kind="verl-yaml", path=path, run_id=run.id, version=version, deleted=deleted
        )
        return lint_run(fixed)
    return _relint(run, [f.override for f in fixes])


def _relint(run: Run, fixes: list[str]) -> Report:
    """Lint the run's (last) config with `fixes` applied (a log's full config dump)."""
    overrides = [hydra_overrides.parse_override(f) for f in fixes]
    config = hydra_overrides.apply(run.config(), overrides)
    meta = dict(run.meta)
    if meta.get("explicit_keys") is not None:
        meta["explicit_keys"] = sorted(set(meta["explicit_keys"]) | {o.key for o in overrides})
    fixed = Run(id=run.id, source=run.source, meta=meta, config_segments=[ConfigSegment(0, config)])
    return lint_run(fixed)


@functools.lru_cache(maxsize=4096)
def _arg_key(arg: str) -> str | None:
    """The dotted key an argument overrides (None for flags, `$@` and the unparseable)."""
    if (arg.startswith("-") and not arg.startswith("~")) or (
        arg.startswith("$") and "=" not in arg
    ):
        return None
    try:
        return hydra_overrides.parse_override(arg).key.split("@", 1)[0]
    except ConfigParseError:
        return None


def _token_for(original: str, fix: Fix) -> str:
    """The new token for an override the user wrote: keeps their `+`/`++` (the key may need it)."""
    try:
        before = hydra_overrides.parse_override(original)
        after = hydra_overrides.parse_override(fix.override)
    except ConfigParseError:
        return fix.override
    if after.op == "set" and before.op in ("add", "force_add"):
        return before.prefix + fix.override
    return fix.override


def _targets(keys: list[str | None], fix: Fix) -> list[int]:
    """Indexes of the arguments a fix acts on (the misspelled key's, else its own key's)."""
    target = fix.replaces or fix.key
    return [i for i, k in enumerate(keys) if k == target]


def _edit_args(args: list[str], fixes: list[Fix]) -> list[str]:
    """`args` with fixes applied as `fix_script` applies them to the text: a changed value in
    its token, a deletion drops the token, anything new after the last override."""
    keys = [_arg_key(a) for a in args]
    out, removed, new = list(args), set(), []
    for fix in fixes:
        where = _targets(keys, fix)
        if fix.deletes and where:
            removed.update(where)
        elif where:
            out[where[-1]] = _token_for(args[where[-1]], fix)
        else:
            new.append(fix.override)
    anchor = max((i for i, k in enumerate(keys) if k and i not in removed), default=-1)
    result = new if anchor < 0 else []
    for i, arg in enumerate(out):
        if i not in removed:
            result.append(arg)
        if i == anchor:
            result.extend(new)
    return result


def fixed_overrides(report: Report) -> list[str]:
    """The run's overrides after `plan_fixes` (a command's args edited; else the fixes alone)."""
    fixes = plan_fixes(report)
    command = report.run.meta.get("command")
    if command:
        return _edit_args(list(command["args"]), fixes)
    out = []
    for fix in fixes:
        if fix.replaces:
            out.append(f"~{fix.replaces}")
        out.append(fix.override)
    return out


def fix_text(report: Report) -> str:
    """`--fix` output without the script's text: the full command (as continued lines), or the
    override list for a YAML or a log."""
    command = report.run.meta.get("command")
    overrides = fixed_overrides(report)
    if not command:
        return "\n".join(overrides)
    env = [f"{k}={shell.quote(v)}" for k, v in command["env"].items()]
    head = " ".join([*env, shell.join_command(command["prefix"])])
    lines = [head] + [f"    {shell.quote(a)}" for a in overrides]
    return " \\\n".join(lines)


def fix_reports(reports: list[Report], text: str | None = None) -> str:
    """`--fix` output for one input: its script edited in place when `text` is the script the
    reports came from, else `fix_text` of each report."""
    if text is not None and reports and all(r.run.source.kind == "verl-command" for r in reports):
        return fix_script(text, reports)
    return "\n\n".join(fix_text(r) for r in reports)


def fix_script(text: str, reports: list[Report]) -> str:
    """The script with each command's fixes made in place; every other byte is kept.

    A changed value replaces its token, a deletion removes it, a new override goes right after
    the command's last override (before a trailing `"$@"`, redirections and pipes), on its own
    continued line when the command spans lines. A command that cannot be edited in place
    (inside `bash -c "…"`) is added at the end, fixed and commented out.
    """
    commands = shell.verl_commands(text)
    if len(commands) != len(reports):
        return "\n\n".join(fix_text(r) for r in reports)
    edits: list[tuple[int, int, str]] = []
    leftovers = []
    for command, report in zip(commands, reports, strict=True):
        fixes = plan_fixes(report)
        found = _text_edits(text, command, fixes) if fixes else []
        if found is None:
            leftovers.append(report)
        else:
            edits.extend(found)
    out = text
    for start, end, new in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        out = out[:start] + new + out[end:]
    for report in leftovers:
        line = report.run.meta.get("line")
        fixed = "\n".join(f"# {x}" for x in fix_text(report).splitlines())
        out += f"\n# logscope --fix: the command on line {line} could not be edited in place:\n"
        out += fixed + "\n"
    return out


def _text_edits(
    text: str, command: shell.VerlCommand, fixes: list[Fix]
) -> list[tuple[int, int, str]] | None:
    """(start, end, replacement) edits of `text` making `fixes`; None when positions are unknown.

    Same effect as `_edit_args`; a token that is not a word of its own (inside `$EXTRA`) is
    overridden by a new argument after it instead of edited.
    """
    spans = command.spans
    if len(spans) != len(command.args) or command.entry_span is None:
        return None
    keys = [_arg_key(a) for a in command.args]
    solo = [s if s is not None and s.solo else None for s in spans]
    edits, removed, new = [], set(), []
    for fix in fixes:
        where = _targets(keys, fix)
        own = [solo[i] for i in where]
        if fix.deletes and where and all(own):
            removed.update(where)
            edits.extend(_removal(text, span) for span in own if span)
        elif where and not fix.deletes and own[-1]:
            token = _token_for(command.args[where[-1]], fix)
            edits.append((own[-1].start, own[-1].end, shell.quote(token, command.quoting)))
        else:
            new.append(shell.quote(fix.override, command.quoting))
    if new:
        last = [spans[i] for i, k in enumerate(keys) if k and i not in removed]
        anchor = last[-1] if last else command.entry_span
        if anchor is None:
            return None
        edits.append((anchor.end, anchor.end, _insertion(text, command, anchor, new)))
    return edits


def _removal(text: str, span: shell.Span) -> tuple[int, int, str]:
    """Remove a word with the blanks and line continuations before it (so no line is left
    holding only a `\\`, and the last argument's line does not end in one)."""
    j = span.start
    while j > 0:
        if text[j - 1] in " \t":
            j -= 1
        elif text[j - 1] == "\n" and j >= 2 and text[j - 2] == "\\":
            j -= 2
        else:
            break
    return (j, span.end, "")


def _insertion(text: str, command: shell.VerlCommand, anchor: shell.Span, tokens: list[str]) -> str:
    """New arguments after `anchor`: one per continued line when the command spans lines."""
    ends = [s.end for s in command.spans if s is not None]
    start = command.entry_span.start if command.entry_span else anchor.start
    if "\\\n" not in text[start : max(ends, default=anchor.end)]:
        return "".join(f" {t}" for t in tokens)
    indent = _indent(text, command, anchor)
    return "".join(f" \\\n{indent}{t}" for t in tokens)


def _indent(text: str, command: shell.VerlCommand, anchor: shell.Span) -> str:
    """The indentation of the anchor's line, else of any argument that starts a line."""
    for span in [anchor, *(s for s in command.spans if s is not None)]:
        line_start = text.rfind("\n", 0, span.start) + 1
        before = text[line_start : span.start]
        if not before.strip():
            return before
    return "    "
