"""`logscope mcp`: the library as Model Context Protocol tools, over stdio.

Each tool calls the function the matching command calls and returns the dict that command prints
with `--format json` (as `structuredContent`, and as JSON text for clients that read only text):
`analyze`, `explain`, `check`, `compare`, `tail_status` (what a `logscope tail --state-file`
has alerted so far) and, when `logscope query` is installed, `query` (read-only). Errors are tool errors carrying the CLI's message (`LogscopeError` text),
never a traceback. Paths are confined to the allowed folders (`--allow-dir`, default: the working
directory): symlinks are resolved, and a folder holding a link out of them is refused.

Works with the official SDK (`pip install 'logscope[mcp]'`), 1.x (decorators) and 2.x
(constructor handlers) alike: the tools are plain functions; `build_server` adapts.
"""

from __future__ import annotations

import glob
import json
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from logscope.exceptions import LogscopeError

SERVER_NAME = "logscope"
TAIL_STATUS_SCHEMA = "logscope.tail-status/1"
#: alerts a tail_status result lists (the newest; the count is always given)
TAIL_ALERTS_SHOWN = 50


class Refused(LogscopeError):
    """A path outside the folders this server may read."""


# ---- confinement -------------------------------------------------------------------------------
@dataclass
class AllowedDirs:
    """The folders the tools may read, resolved; relative paths are relative to the first."""

    dirs: list[Path]

    @classmethod
    def of(cls, dirs: Sequence[str | Path] | None) -> AllowedDirs:
        """The given folders (default: the working directory), each an existing folder."""
        chosen = [Path(d).expanduser() for d in dirs] if dirs else [Path.cwd()]
        for d in chosen:
            if not d.is_dir():
                raise LogscopeError(f"--allow-dir {d}: not a folder")
        return cls([d.resolve() for d in chosen])

    def _where(self) -> str:
        return ", ".join(map(str, self.dirs))

    def inside(self, real: Path) -> bool:
        return any(real == d or d in real.parents for d in self.dirs)

    def path(self, text: str) -> str:
        """The path to give the library for what a client passed, or Refused. A relative path
        is taken from the first allowed folder (as typed when that is the working directory,
        so that reports name it as the CLI run there does). Globs pass; `entries` checks what
        they match."""
        text = text.strip()
        if not text:
            raise LogscopeError("empty path")
        if "://" in text:
            raise Refused(f"{text}: this server reads only files under {self._where()}, not URIs")
        p = Path(text).expanduser()
        if not p.is_absolute() and Path.cwd().resolve() != self.dirs[0]:
            p = self.dirs[0] / p
        if not os.path.lexists(p) and glob.has_magic(str(p)):
            self._check_glob_root(str(p), text)
            return str(p)
        self.check(p, text)
        return str(p)

    def _check_glob_root(self, pattern: str, text: str) -> None:
        """A pattern whose fixed leading part is neither inside an allowed folder nor above one
        is refused before it is expanded (what it matches is checked by `entries`)."""
        parts = Path(pattern).parts
        first_magic = next(i for i, q in enumerate(parts) if glob.has_magic(q))
        real = Path(".", *parts[:first_magic]).resolve()
        if not self.inside(real) and not any(real in d.parents for d in self.dirs):
            raise Refused(f"{text} is outside the folders this server reads ({self._where()})")

    def check(self, p: Path | str, text: str | None = None) -> None:
        """Refused unless `p` resolves (symlinks followed) inside an allowed folder, and, for a
        folder, holds no link out of them."""
        shown = text if text is not None else str(p)
        real = Path(p).resolve()
        if not self.inside(real):
            raise Refused(f"{shown} is outside the folders this server reads ({self._where()})")
        if real.is_dir():
            for dirpath, dirnames, filenames in os.walk(real, followlinks=False):
                for name in (*dirnames, *filenames):
                    child = Path(dirpath) / name
                    if child.is_symlink() and not self.inside(child.resolve()):
                        raise Refused(
                            f"{shown} holds a link out of the folders this server reads "
                            f"({child.relative_to(real)})"
                        )

    def entries(self, entries: Sequence[tuple[str, str | None]]) -> None:
        """Every input a glob or folder expanded to must be inside too."""
        for path, _ in entries:
            if "://" in path:
                raise Refused(f"{path}: this server reads only files, not URIs")
            self.check(path)


# ---- results -----------------------------------------------------------------------------------
@dataclass
class ToolResult:
    """What a tool gives: the CLI's JSON (text and dict), extra text blocks and `_meta`."""

    data: dict[str, Any]
    text: str
    extra: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)


def _result(data: dict[str, Any], text: str | None = None, **kw: Any) -> ToolResult:
    if text is None:
        text = json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False)
    return ToolResult(data=data, text=text, **kw)


def _listed(text: str) -> tuple[dict[str, Any], str]:
    """The CLI's JSON text of reports as a dict: one report as is, several as {"reports": [...]}
    (structured content must be an object)."""
    parsed = json.loads(text)
    if isinstance(parsed, dict):
        return parsed, text
    wrapped = {"reports": parsed}
    return wrapped, json.dumps(wrapped, indent=2, allow_nan=False)


def _exit_meta(failing: bool, fail_on: str) -> tuple[list[str], dict[str, Any]]:
    code = 1 if failing else 0
    note = (
        f"exit_code {code}: "
        + ("findings at or above" if failing else "nothing at or above")
        + f" --fail-on {fail_on}"
    )
    return [note], {"logscope/exit_code": code}


# ---- the tools (each mirrors its command's JSON path) -----------------------------------------
@dataclass
class Context:
    """What every tool shares: the allowed folders and the store."""

    allowed: AllowedDirs
    store: Path | None = None


def _codes(values: list[str] | None) -> list[str] | None:
    from logscope.cli.common import split_codes

    return split_codes(values)


def analyze_tool(ctx: Context, args: dict[str, Any]) -> ToolResult:
    """`logscope analyze PATH... --format json|verdict` (one run: the report; many: the fleet)."""
    from logscope import fleet, settings, verdict
    from logscope.report import reports_to_json

    paths = [ctx.allowed.path(p) for p in args["paths"]]
    fail_on = args.get("fail_on", "error")
    with settings.using(None):
        entries, passed = fleet.inputs(paths)
        ctx.allowed.entries(entries)
        options = {
            "source": args.get("source"),
            "only": _codes(args.get("only")),
            "skip": _codes(args.get("skip")),
            "store_dir": ctx.store,
            "use_cache": not args.get("no_cache", False),
        }
        reports = fleet.analyze_all(entries, stitch=not args.get("no_stitch", False), **options)
        fleet.require_readable(reports)
        one = len(reports) == 1 and not passed
        if args.get("verdict"):
            data = verdict.verdict(reports[0]) if one else verdict.fleet_verdict(reports, passed)
            out = _result(data, verdict.to_json(data))
        elif one:
            out = _result(*_listed(reports_to_json(reports)))
        else:
            out = _result(fleet.fleet_dict(reports, passed))
            out.text = json.dumps(out.data, indent=2, allow_nan=False)
    out.extra, out.meta = _exit_meta(any(r.fails(fail_on) for r in reports), fail_on)
    return out


def explain_tool(ctx: Context, args: dict[str, Any]) -> ToolResult:
    """`logscope explain KEY|RUN --format json`."""
    from logscope.cli.explain import SCHEMA, explain_key, explain_run

    target = args["target"]
    if not target.strip():
        raise LogscopeError("explain needs a metric key or a path, not an empty string")
    candidate = Path(target).expanduser()
    if not candidate.is_absolute() and Path.cwd().resolve() != ctx.allowed.dirs[0]:
        candidate = ctx.allowed.dirs[0] / candidate
    if "://" not in target and candidate.exists():
        from logscope.store import Store

        path = ctx.allowed.path(target)
        use_cache = not args.get("no_cache", False)
        runs = Store(ctx.store).load(path, source=args.get("source"), use_cache=use_cache)
        return _result({"schema": SCHEMA, "kind": "runs", "runs": [explain_run(r) for r in runs]})
    return _result(explain_key(target))


def check_tool(ctx: Context, args: dict[str, Any]) -> ToolResult:
    """`logscope check PATH | -- COMMAND | - --format json`, and `--fix` as a second text."""
    from logscope import settings
    from logscope.check import check_command, check_path, check_text, fix_reports, read_script
    from logscope.report import reports_to_json

    given = [k for k in ("path", "command", "text") if args.get(k) not in (None, "", [])]
    if len(given) != 1:
        raise LogscopeError(
            "check needs exactly one of path (a script, YAML or log), command (a verl command "
            "line) or text (a script's text)"
        )
    version = args.get("verl_version")
    script = None
    with settings.using(None), _confined_yaml(ctx.allowed):
        if given == ["path"]:
            path = ctx.allowed.path(args["path"])
            reports = check_path(path, version=version)
            if args.get("fix") and Path(path).is_file():
                script = read_script(path)
        elif given == ["text"]:
            script = args["text"]
            reports = check_text(script, path="<stdin>", version=version)
        else:
            command = args["command"]
            reports = check_command(
                [command] if isinstance(command, str) else list(command), version=version
            )
        out = _result(*_listed(reports_to_json(reports)))
        if args.get("fix"):
            out.extra.append(fix_reports(reports, script))
    fail_on = args.get("fail_on", "error")
    extra, out.meta = _exit_meta(any(r.fails(fail_on) for r in reports), fail_on)
    out.extra += extra
    return out


@contextmanager
def _confined_yaml(allowed: AllowedDirs) -> Iterator[None]:
    """A script's `--config-path` YAML is read only inside the allowed folders (check reads it
    through `logscope.check.load_yaml_config`; the call holds `_LOCK`)."""
    import logscope.check as check

    original = check.load_yaml_config

    def guarded(path: Path) -> dict[str, Any]:
        allowed.check(path)
        return original(path)

    check.load_yaml_config = guarded  # type: ignore[assignment]
    try:
        yield
    finally:
        check.load_yaml_config = original  # type: ignore[assignment]


def compare_tool(ctx: Context, args: dict[str, Any]) -> ToolResult:
    """`logscope compare A B... --format json` (a run: a path, or a stored run id)."""
    from logscope.compare import compare_runs
    from logscope.store import Store

    runs = args["runs"]
    st = Store(ctx.store)
    loaded = []
    for item in runs:
        candidate = Path(item) if Path(item).is_absolute() else ctx.allowed.dirs[0] / item
        if "://" not in item and not candidate.exists() and (stored := st.get_run(item)):
            loaded.append(stored)
            continue
        loaded += st.load(ctx.allowed.path(item), use_cache=not args.get("no_cache", False))
    if len(loaded) < 2:
        raise LogscopeError(
            f"compare needs at least two runs; {', '.join(runs)} gave {len(loaded)}"
        )
    out = _result(compare_runs(loaded).to_dict())
    out.text = json.dumps(out.data, indent=2, allow_nan=False)
    fail_on = args.get("fail_on", "never")
    if fail_on != "never":
        from logscope import settings
        from logscope.analyze import analyze_run

        with settings.using(None):
            failing = any(analyze_run(run).fails(fail_on) for run in loaded)
        out.extra, out.meta = _exit_meta(failing, fail_on)
    return out


def tail_status(
    state_file: str | Path, read_log: Callable[[Path], Any] | None = None
) -> dict[str, Any]:
    """What a `logscope tail --state-file FILE` holds: the followed log, the alerts so far (name,
    step, code, title), whether it is stalled, the last alerted step, and how long ago the log
    changed. `read_log(path)` (e.g. a Store load) adds the log's last step and step count."""
    from logscope.tail import STATE_VERSION

    p = Path(state_file)
    try:
        raw = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise LogscopeError(f"{p}: no such file") from None
    except OSError as exc:
        raise LogscopeError(f"{p}: cannot read: {exc.strerror}") from None
    try:
        state = json.loads(raw)
        if not isinstance(state, dict):
            raise ValueError
    except ValueError:
        raise LogscopeError(f"{p}: not a logscope tail state file (not a JSON object)") from None
    if state.get("version") != STATE_VERSION or "path" not in state:
        raise LogscopeError(
            f"{p}: not a logscope tail state file of version {STATE_VERSION} "
            f"(version {state.get('version')!r})"
        )
    names = _diagnoses()
    alerted = [a for a in state.get("alerted", []) if isinstance(a, dict)]
    alerts = [
        {"name": a.get("name"), "step": a.get("step"), **names.get(str(a.get("name")), {})}
        for a in alerted
    ]
    steps = [a["step"] for a in alerts if isinstance(a["step"], int)]
    log = Path(state["path"])
    info: dict[str, Any] = {"path": str(log), "exists": log.exists()}
    if info["exists"]:
        st = log.stat()
        info["size"] = st.st_size
        info["modified_s_ago"] = round(max(time.time() - st.st_mtime, 0.0), 1)
    info["last_step"] = info["steps"] = None
    if read_log is not None and info["exists"]:
        run_steps = read_log(log)
        if run_steps is not None:
            info["steps"] = len(run_steps)
            info["last_step"] = int(run_steps[-1]) if len(run_steps) else None
    return {
        "schema": TAIL_STATUS_SCHEMA,
        "state_file": str(p),
        "log": info,
        "alerts_count": len(alerts),
        "alerts": alerts[-TAIL_ALERTS_SHOWN:],
        "delivered_count": len(state.get("sent_ids", [])),
        "last_alerted_step": max(steps) if steps else None,
        "stalled": bool(state.get("stalled", False)),
        "stall_step": state.get("stall_step"),
    }


def _diagnoses() -> dict[str, dict[str, str]]:
    """name → code and title of every diagnosis (alerts are kept by name)."""
    from logscope.detectors.registry import detector_classes

    return {c.name: {"code": c.code, "title": c.title} for c in detector_classes()}


def tail_status_tool(ctx: Context, args: dict[str, Any]) -> ToolResult:
    """`tail_status`: the state file, and the followed log's last step when it may be read."""
    state_file = ctx.allowed.path(args["state_file"])

    def steps_of(log: Path) -> Any:
        from logscope.store import Store

        try:
            ctx.allowed.check(log)
        except Refused:
            return None  # the log is outside the allowed folders: its steps stay unknown
        runs = Store(ctx.store).load(str(log), use_cache=False)
        return runs[0].steps if runs else None

    reader = steps_of if args.get("read_log", True) else None
    return _result(tail_status(state_file, reader))


#: rows a query result gives at most (the count of all rows is always given)
QUERY_MAX_ROWS = 1000


def query_tool(ctx: Context, args: dict[str, Any]) -> ToolResult:
    """`logscope query SQL --format json` over the server's store, read-only: SELECT-like
    statements only, and DuckDB may touch no file outside the store (locked configuration)."""
    from logscope.cli.query import _duckdb, _execute, connect, to_json
    from logscope.store import Store

    duckdb = _duckdb()
    sql = args["sql"]
    root = Store(ctx.store).root
    if not (root / "runs").is_dir():
        raise LogscopeError(f"no store at {root} (logscope analyze --store {root} RUNS fills one)")
    try:
        probe = duckdb.connect(":memory:")
        try:
            kinds = [s.type for s in probe.extract_statements(sql)]
        finally:
            probe.close()
        if not kinds or any(k != duckdb.StatementType.SELECT for k in kinds):
            shown = ", ".join(sorted({k.name for k in kinds})) or "nothing"
            raise LogscopeError(f"query: only SELECT-like statements are run here, not {shown}")
        con = connect(root)
        con.execute(f"SET allowed_directories = [{_sql_quote(str(root) + os.sep)}]")
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
        columns, rows = _execute(con, sql)
    except duckdb.Error as exc:
        raise LogscopeError(f"query failed: {exc}") from None
    limit = args.get("max_rows", QUERY_MAX_ROWS)
    out = _result(*_listed(to_json(columns, rows[:limit])))
    if len(rows) > limit:
        out.data = {**out.data, "truncated": True, "total_rows": len(rows)}
        out.text = json.dumps(out.data, indent=2, ensure_ascii=False, allow_nan=False)
    return out


def _sql_quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _has_query() -> bool:
    """`logscope query` is there (its module; DuckDB is checked when a query runs)."""
    import importlib.util

    return importlib.util.find_spec("logscope.cli.query") is not None


# ---- schemas ----------------------------------------------------------------------------------
_STR = {"type": "string"}
_STRS = {"type": "array", "items": {"type": "string"}}
_ARRAY = {"type": "array"}
_SEVERITY = {"type": "string", "enum": ["info", "warning", "error", "critical", "never"]}
_READ_ONLY = {"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False}


def _obj(props: dict[str, Any], required: Sequence[str] = ()) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": props,
        "required": list(required),
        "additionalProperties": False,
    }


def _out(schemas: Sequence[str], props: dict[str, Any], what: str) -> dict[str, Any]:
    return {
        "type": "object",
        "description": what,
        "properties": {"schema": {"type": "string", "enum": list(schemas)}, **props},
        "additionalProperties": True,
    }


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    run: Callable[[Context, dict[str, Any]], ToolResult]


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "analyze",
        "Diagnose verl RL training runs (console logs, JSONL, TensorBoard or W&B folders, CSV, "
        "folders or globs of them): what went wrong, at which step, and which verl parameter "
        "to change (ready Hydra overrides). Start with verdict=true: a JSON of at most 4 KB "
        "(logscope.verdict/1: status healthy|warning|broken|crashed, first incident with its "
        "step and first mover, top 3 findings with overrides, unknown keys and skipped lines; "
        "for many runs logscope.fleet-verdict/1: runs by status and the worst runs). Without "
        "it: the full report, exactly `logscope analyze PATH --format json` (logscope.report/1"
        " for one run; logscope.fleet/1 with a triage table and every report for several). "
        "The exit code the CLI would give for fail_on is in _meta['logscope/exit_code'].",
        _obj(
            {
                "paths": {**_STRS, "minItems": 1, "description": "Logs, run folders or globs."},
                "verdict": {"type": "boolean", "default": False, "description": "Compact verdict."},
                "only": {**_STRS, "description": "Run only these diagnoses (codes or names)."},
                "skip": {**_STRS, "description": "Skip these diagnoses (codes or names)."},
                "fail_on": {**_SEVERITY, "default": "error"},
                "source": {**_STR, "description": "Force the reader (verl-console, verl-jsonl…)."},
                "no_cache": {"type": "boolean", "default": False},
                "no_stitch": {
                    "type": "boolean",
                    "default": False,
                    "description": "Keep resumed segments and rotated files runs of their own.",
                },
            },
            ["paths"],
        ),
        _out(
            [
                "logscope.report/1",
                "logscope.fleet/1",
                "logscope.verdict/1",
                "logscope.fleet-verdict/1",
            ],
            {
                "status": {**_STR, "description": "verdicts: healthy|warning|broken|crashed"},
                "run": {"type": "object", "description": "report: the run summary"},
                "summary": {"type": "object", "description": "worst severity, counts"},
                "findings": {
                    **_ARRAY,
                    "description": "report: code, name, severity, "
                    "step, message, evidence, advice (parameter, current, suggested, "
                    "override)",
                },
                "incidents": {**_ARRAY, "description": "findings grouped in time"},
                "top_findings": {**_ARRAY, "description": "verdict: the top 3"},
                "runs": {"description": "fleet: triage rows, worst first"},
            },
            "A report, a fleet, or their verdicts (the `schema` field says which).",
        ),
        analyze_tool,
    ),
    ToolSpec(
        "explain",
        "Explain a verl metric key (meaning, unit, healthy range and its source, traps, the "
        "versions that log it, the diagnoses that read it), or, given a path to a run, every "
        "metric of the run with its last value, recent median, healthy range and verdict, and "
        "the keys the registry does not know. Exactly `logscope explain TARGET --format json` "
        "(logscope.explain/1). An unknown key is an error listing close matches.",
        _obj(
            {
                "target": {**_STR, "description": "A metric key (actor/ppo_kl) or a run's path."},
                "source": {**_STR, "description": "Force the reader for a run."},
                "no_cache": {"type": "boolean", "default": False},
            },
            ["target"],
        ),
        _out(
            ["logscope.explain/1"],
            {
                "kind": {**_STR, "enum": ["metric", "runs"]},
                "meaning": _STR,
                "healthy": _ARRAY,
                "runs": {**_ARRAY, "description": "kind=runs: per run, groups of metrics"},
            },
            "A metric's registry entry (kind=metric) or a run's metrics (kind=runs).",
        ),
        explain_tool,
    ),
    ToolSpec(
        "check",
        "Lint a verl launch before running it: batch-size divisibility, KL settings, GPU "
        "memory, GRPO group size, unknown keys… Give one of path (a launch script, YAML config "
        "or log), command (a verl command line: python3 -m verl.trainer.main_ppo k=v …) or text "
        "(a script's text). Exactly `logscope check … --format json` (logscope.report/1, kind "
        "check; several reports come as {reports: [...]}); fix=true adds a second text block "
        "with `--fix` output: the script or command with the fewest changes that clear the "
        "findings, or the overrides.",
        _obj(
            {
                "path": {**_STR, "description": "A launch script, YAML config or log."},
                "command": {
                    "oneOf": [_STR, _STRS],
                    "description": "A verl command line (one string, or its words).",
                },
                "text": {**_STR, "description": "A launch script's text."},
                "verl_version": {**_STR, "description": "X.Y[.Z] whose defaults apply."},
                "fix": {"type": "boolean", "default": False},
                "fail_on": {**_SEVERITY, "default": "error"},
            }
        ),
        _out(
            ["logscope.report/1"],
            {
                "findings": _ARRAY,
                "reports": {**_ARRAY, "description": "several reports"},
            },
            "The check report (lint findings with advice and overrides).",
        ),
        check_tool,
    ),
    ToolSpec(
        "compare",
        "Compare two or more runs against the first: key metrics (median of the last 20%) with "
        "deltas, the step where each run parts from the reference, and the config diff. Runs "
        "are paths or stored run ids. Exactly `logscope compare A B … --format json`.",
        _obj(
            {
                "runs": {**_STRS, "minItems": 2, "description": "The reference first."},
                "fail_on": {**_SEVERITY, "default": "never"},
                "no_cache": {"type": "boolean", "default": False},
            },
            ["runs"],
        ),
        _out(
            ["logscope.compare/1"],
            {
                "runs": _ARRAY,
                "key_metrics": _ARRAY,
                "divergence": _ARRAY,
                "config_diff": _ARRAY,
            },
            "Key-metric rows with deltas, divergence per run, config diff.",
        ),
        compare_tool,
    ),
    ToolSpec(
        "tail_status",
        "The status of a running (or stopped) `logscope tail --state-file FILE`: the followed "
        "log (size, seconds since it changed, last step and step count when read_log), the "
        "alerts so far (diagnosis name, code, title, step; the newest 50), whether it is "
        "stalled, and the last alerted step (logscope.tail-status/1).",
        _obj(
            {
                "state_file": {**_STR, "description": "The --state-file of `logscope tail`."},
                "read_log": {
                    "type": "boolean",
                    "default": True,
                    "description": "Read the followed log for its last step.",
                },
            },
            ["state_file"],
        ),
        _out(
            [TAIL_STATUS_SCHEMA],
            {
                "log": {"type": "object"},
                "alerts": _ARRAY,
                "alerts_count": {"type": "integer"},
                "stalled": {"type": "boolean"},
                "last_alerted_step": {"type": ["integer", "null"]},
            },
            "What the tail has alerted so far and whether it is stalled.",
        ),
        tail_status_tool,
    ),
)


QUERY_TOOL = ToolSpec(
    "query",
    "SQL (DuckDB) over the store of analysed runs, as a fleet database: views runs (a row "
    "per run: source, project, experiment, steps, worst severity, diagnoses, config JSON), "
    "findings (a row per finding), metrics (run_id, step, metric, value, wall_time) and config "
    "(run_id, key, value). Read-only: SELECT-like statements only, no file outside the store. "
    "Exactly `logscope query SQL --format json` (logscope.query/1: columns, rows as objects); "
    f"at most max_rows rows (default {QUERY_MAX_ROWS}; then truncated=true and total_rows).",
    _obj(
        {
            "sql": {**_STR, "description": "e.g. SELECT name, count(*) FROM findings GROUP BY 1"},
            "max_rows": {"type": "integer", "minimum": 1, "default": QUERY_MAX_ROWS},
        },
        ["sql"],
    ),
    _out(
        ["logscope.query/1"],
        {
            "columns": _STRS,
            "rows": {**_ARRAY, "items": {"type": "object"}},
            "truncated": {"type": "boolean"},
            "total_rows": {"type": "integer"},
        },
        "The query's columns and rows.",
    ),
    query_tool,
)
if _has_query():
    TOOLS = (*TOOLS, QUERY_TOOL)

# ---- calling a tool ---------------------------------------------------------------------------
_LOCK = threading.Lock()  # settings and the store are process-wide: one call at a time


def call(ctx: Context, name: str, arguments: dict[str, Any] | None) -> ToolResult:
    """Validate `arguments` against the tool's schema and run it (LogscopeError on bad input)."""
    import jsonschema

    spec = next((t for t in TOOLS if t.name == name), None)
    if spec is None:
        raise LogscopeError(f"unknown tool {name!r}; tools: {', '.join(t.name for t in TOOLS)}")
    args = dict(arguments or {})
    try:
        jsonschema.validate(args, spec.input_schema)
    except jsonschema.ValidationError as exc:
        where = ".".join(map(str, exc.absolute_path))
        raise LogscopeError(f"{name}: {where + ': ' if where else ''}{exc.message}") from None
    with _LOCK:
        return spec.run(ctx, args)


def error_text(exc: BaseException) -> str:
    """The message a client sees: the CLI's for a LogscopeError, one line otherwise."""
    if isinstance(exc, LogscopeError):
        return str(exc)
    return f"internal error: {type(exc).__name__}: {exc}"


# ---- the SDK adapter --------------------------------------------------------------------------
def _tools(types: Any) -> list[Any]:
    return [
        types.Tool(
            name=t.name,
            description=t.description,
            inputSchema=t.input_schema,
            outputSchema=t.output_schema,
            annotations=types.ToolAnnotations(**_READ_ONLY),
        )
        for t in TOOLS
    ]


def _call_result(types: Any, result: ToolResult) -> Any:
    content = [types.TextContent(type="text", text=t) for t in (result.text, *result.extra)]
    return types.CallToolResult(
        content=content, structuredContent=result.data, isError=False, _meta=result.meta or None
    )


def _error_result(types: Any, exc: BaseException) -> Any:
    text = types.TextContent(type="text", text=error_text(exc))
    return types.CallToolResult(content=[text], isError=True)


async def _run_call(ctx: Context, name: str, arguments: dict[str, Any] | None) -> ToolResult:
    import anyio

    return await anyio.to_thread.run_sync(call, ctx, name, arguments)


class _ToolError(Exception):
    """A tool error for mcp 1.x, which sends the exception's text."""


def build_server(ctx: Context) -> Any:
    """An SDK `Server` with the tools, for the installed major version of `mcp`."""
    import inspect

    from mcp import types
    from mcp.server.lowlevel import Server

    from logscope import __version__

    instructions = (
        "logscope diagnoses verl RL training logs. Call analyze with verdict=true first; "
        "then the full report, explain for a metric, check before a launch."
    )
    if "on_call_tool" in inspect.signature(Server.__init__).parameters:  # mcp 2.x

        async def on_list_tools(_ctx: Any, _params: Any) -> Any:
            return types.ListToolsResult(tools=_tools(types))

        async def on_call_tool(_ctx: Any, params: Any) -> Any:
            try:
                result = await _run_call(ctx, params.name, params.arguments)
            except Exception as exc:
                return _error_result(types, exc)
            return _call_result(types, result)

        return Server(
            SERVER_NAME,
            version=__version__,
            instructions=instructions,
            on_list_tools=on_list_tools,
            on_call_tool=on_call_tool,
        )

    server = Server(SERVER_NAME, version=__version__, instructions=instructions)  # mcp 1.x

    @server.list_tools()  # type: ignore[misc, untyped-decorator]
    async def list_tools() -> list[Any]:
        return _tools(types)

    async def call_tool(name: str, arguments: dict[str, Any]) -> Any:
        # 1.x before 1.17 takes (content, structured) but no CallToolResult, and makes a raised
        # exception's text the tool error: both ways work up to 2.0 (`_meta` is left out).
        try:
            result = await _run_call(ctx, name, arguments)
        except Exception as exc:
            raise _ToolError(error_text(exc)) from None
        content = _call_result(types, result).content
        return content, result.data

    try:  # validation is `call`'s (with the CLI's wording)
        register = server.call_tool(validate_input=False)
    except TypeError:  # before mcp 1.10
        register = server.call_tool()
    register(call_tool)
    return server


def serve(allow_dirs: Sequence[str | Path] | None = None, store: Path | None = None) -> None:
    """Serve the tools over stdio until the client closes the connection."""
    import anyio
    from mcp.server.stdio import stdio_server

    ctx = Context(AllowedDirs.of(allow_dirs), store)
    server = build_server(ctx)

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)
