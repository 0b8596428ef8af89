"""`logscope explain KEY|RUN`: what a verl metric means, or what a run's metrics say.

KEY (any metric name, also a concrete one of a pattern such as `rollout_corr/chi2_token`): its
metric-registry entry. RUN (a path `analyze` accepts; an existing path is a run, anything else a
key): the run's metrics grouped by family, with last value, recent median, healthy range and
verdict (`logscope.health.judge`), then the keys the registry does not know.
"""

from __future__ import annotations

import difflib
import json
import math
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Group
from rich.table import Table
from rich.text import Text

from logscope.cli.common import (
    NoCacheOption,
    OutputOption,
    SourceOption,
    StoreOption,
    emit,
    same_file,
    user_errors,
)
from logscope.exceptions import LogscopeError

if TYPE_CHECKING:
    from logscope.frameworks import Profile
    from logscope.metric_registry import MetricEntry, ReferenceData, Registry
    from logscope.model import Run

SCHEMA = "logscope.explain/1"


class ExplainFormat(StrEnum):
    rich = "rich"
    json = "json"
    markdown = "markdown"


def explain(
    target: Annotated[
        str,
        typer.Argument(
            metavar="KEY|RUN",
            help="A metric key (actor/ppo_kl, rollout_corr/chi2_token) or a log to read.",
        ),
    ],
    format: Annotated[
        ExplainFormat, typer.Option("--format", "-f", help="Output format.")
    ] = ExplainFormat.rich,
    output: OutputOption = None,
    store: StoreOption = None,
    no_cache: NoCacheOption = False,
    source: SourceOption = None,
) -> None:
    """Explain a verl metric, or every metric of a run.

    With KEY: its meaning, unit, healthy range(s) and their sources, traps, the verl versions and
    trainers that log it, and the diagnoses that read it. An unknown key: exit 2, with close
    matches. With RUN (an existing path: a log, folder or run directory): per metric family, each
    key's last value, the median of its last steps, the healthy range and the verdict, then the
    keys the registry does not know.

    Example: logscope explain rollout_corr/chi2_token; logscope explain run.log -f json
    """
    with user_errors():
        if not target.strip():
            raise LogscopeError("explain needs a metric key or a path, not an empty string")
        if output is not None and same_file(output, Path(target)):
            raise LogscopeError(f"--output {output} is the input; refusing to overwrite it")
        if Path(target).exists():
            from logscope.store import Store

            runs = Store(store).load(target, source=source, use_cache=not no_cache)
            data = {"schema": SCHEMA, "kind": "runs", "runs": [explain_run(r) for r in runs]}
            view, markdown = _runs_view, _runs_markdown
        else:
            data = explain_key(target)
            view, markdown = (lambda d, width: _key_view(d)), _key_markdown
    emit(
        format,
        output,
        lambda console: console.print(view(data, console.width)),
        json=lambda: json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False),
        markdown=lambda: markdown(data),
    )


# ---- KEY ---------------------------------------------------------------------------------------
def _registry() -> Registry:
    from logscope.metric_registry import load

    return load()


def range_text(low: float | None, high: float | None) -> str:
    """`≤ 0.05`, `≥ 8`, `0.1–2`, `–` (no range)."""
    from logscope.health import num

    if low is None and high is None:
        return "–"
    if low is None:
        return f"≤ {num(high)}"
    if high is None:
        return f"≥ {num(low)}"
    return f"{num(low)}–{num(high)}"


def _reference_dict(ref: ReferenceData) -> dict[str, Any]:
    from logscope.sources import cite

    return {
        "key": ref.key,
        "label": ref.label,
        "concept": ref.concept,
        "unit": ref.unit,
        "healthy": range_text(*ref.healthy),
        "by_algorithm": {a: range_text(*r) for a, r in ref.by_algorithm.items()},
        "alarm_low": ref.alarm_low,
        "alarm_high": ref.alarm_high,
        "rule": ref.rule,
        "source": cite(ref.source),
    }


def related_diagnoses(concepts: tuple[str, ...]) -> list[dict[str, str]]:
    """Diagnoses whose `concepts` include one of `concepts`."""
    from logscope.detectors.registry import detector_classes

    return [
        {"code": cls.code, "name": cls.name, "title": cls.title}
        for cls in detector_classes()
        if set(getattr(cls, "concepts", ()) or ()) & set(concepts)
    ]


def entry_dict(entry: MetricEntry, registry: Registry) -> dict[str, Any]:
    """Everything the registry says about one family, citations resolved."""
    from logscope.sources import cite

    concepts = registry.concepts_of(entry)
    return {
        "entry": entry.id,
        "concept": entry.concept,
        "concepts": list(concepts),
        "keys": list(entry.keys),
        "patterns": list(entry.patterns),
        "renames": [{"old": r.old, "new": r.new, "note": r.note} for r in entry.renames],
        "meaning": entry.meaning,
        "unit": entry.unit,
        "versions": entry.versions,
        "trainers": list(entry.trainers),
        "healthy": [_reference_dict(r) for r in registry.references_of(entry)],
        "ranges": [
            {"key": r.key, "healthy": r.healthy, "source": cite(r.source)} for r in entry.ranges
        ],
        "nan": entry.nan,
        "traps": list(entry.traps),
        "value_traps": [
            {"pattern": t.pattern, "when": t.when, "verdict": t.verdict, "meaning": t.meaning}
            for t in registry.traps_of(entry)
        ],
        "diagnoses": related_diagnoses(concepts),
        "source": cite(entry.source),
    }


def explain_key(key: str) -> dict[str, Any]:
    """The registry entry of `key` as a dict; LogscopeError (with close matches) when unknown."""
    from logscope.frameworks import FRAMEWORKS, get, verl_equivalent

    registry = _registry()
    entry = registry.lookup(key)
    if entry is not None:
        return {"schema": SCHEMA, "kind": "metric", "key": key, **entry_dict(entry, registry)}
    for name in FRAMEWORKS[1:]:  # another framework's key: the verl family of its concept
        profile = get(name)
        equivalent = verl_equivalent(profile, key)
        entry = registry.lookup(equivalent) if equivalent else None
        if entry is not None:
            return {
                "schema": SCHEMA,
                "kind": "metric",
                "key": key,
                "framework": profile.title,
                "verl_equivalent": equivalent,
                "framework_note": profile.note(key),
                **entry_dict(entry, registry),
            }
    for name in FRAMEWORKS[1:]:  # a key the framework logs that no detector judges
        profile = get(name)
        if profile.knows(key):
            return _framework_only(key, profile)
    close = difflib.get_close_matches(key, registry.all_names(), n=5, cutoff=0.5)
    hint = f"; close matches: {', '.join(close)}" if close else ""
    raise LogscopeError(f"unknown metric key {key!r} (not a file either){hint}")


def _framework_only(key: str, profile: Profile) -> dict[str, Any]:
    """What logscope knows of a key another framework logs but no detector reads."""
    note = profile.note(key)
    return {
        "schema": SCHEMA,
        "kind": "metric",
        "key": key,
        "framework": profile.title,
        "verl_equivalent": None,
        "framework_note": note,
        "entry": f"{profile.name}:{key}",
        "concept": "",
        "concepts": [],
        "keys": [key],
        "patterns": [],
        "renames": [],
        "meaning": note or f"A {profile.title} metric that logscope reads but does not judge.",
        "unit": "",
        "versions": "",
        "trainers": [],
        "healthy": [],
        "ranges": [],
        "nan": "",
        "traps": [],
        "value_traps": [],
        "diagnoses": [],
        "source": profile.source,
    }


# ---- RUN ---------------------------------------------------------------------------------------
def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def _recent_median(run: Run, metric: str) -> float | None:
    """The median of the metric's last few finite, measured values (as `recent_level`)."""
    from logscope.health import RECENT_STEPS, _median, sentinel

    _, values = run.series(metric)
    picked: list[float] = []
    for value in reversed(values.tolist()):
        if math.isfinite(value) and not sentinel(metric, value):
            picked.append(float(value))
            if len(picked) >= RECENT_STEPS:
                break
    return _median(picked) if picked else None


def _applies(ref: ReferenceData, entry: MetricEntry, metric: str, registry: Registry) -> bool:
    return metric in registry.concepts.get(ref.concept, ()) or (
        ref.concept == entry.concept and ref.unit == entry.unit
    )


def metric_row(run: Run, metric: str, entry: MetricEntry, registry: Registry) -> dict[str, Any]:
    """One line of the run table: key, last value, recent median, healthy range, verdict."""
    from logscope import health

    steps, values = run.series(metric)
    last = float(values[-1]) if len(values) else None
    step = int(steps[-1]) if len(steps) else None
    median = _recent_median(run, metric)
    refs = [r for r in registry.references_of(entry) if _applies(r, entry, metric, registry)]
    ref = health.REFERENCES[refs[0].key] if refs else None
    note = ""
    if ref is None:
        dummy = health.Reference("", "", entry.concept, entry.unit)
        verdict = health.judge(dummy, median if median is not None else last, run, metric)
        healthy = "–"
    elif ref.key == "gen_share":
        shares = [s for _, s, extra in health.gen_shares(run) if not extra]
        share = health._median(shares[-health.RECENT_STEPS :]) if shares else None
        verdict = health.judge(ref, share, run) if share is not None else health.NO_RANGE
        healthy = f"< {ref.healthy[1]:.0%} of the step"
        note = "" if share is None else f"generation share {share:.0%}"
    else:
        scale, clip_note = 1.0, ""
        if ref.key in ("actor_grad_norm", "critic_grad_norm"):
            scale, where = health.grad_clip(run, ref.key.split("_", 1)[0])
            clip_note = f"clip {health.num(scale)} ({where})"
        level = health.recent_level(run, ref.concept) if ref.concept in registry.concepts else None
        value = level.value if level is not None and level.metric == metric else median
        verdict = health.judge(ref, value if value is not None else last, run, metric, scale)
        healthy = health.range_text(ref, run, scale)
        note = clip_note
    bare = metric.removeprefix("actor/") if metric.startswith("actor/rollout_corr/") else metric
    for known in entry.ranges:
        if ref is None and known.key == bare:  # published, not judged: shown in the note
            note = "; ".join(x for x in (note, f"published range {known.healthy}") if x)
    if last is not None and (trap := health.trap_for(metric, last, run.value_resolution)):
        note = "; ".join(x for x in (note, trap.note) if x)
    return {
        "key": metric,
        "step": step,
        "last": _finite(last),
        "last_text": "–" if last is None else health.num(last),
        "median": median,
        "healthy": healthy,
        "verdict": verdict,
        "note": note,
    }


def explain_run(run: Run) -> dict[str, Any]:
    """The run's metrics grouped by registry family (file order), then the unknown keys."""
    from logscope.frameworks import profile_of, verl_equivalent

    registry = _registry()
    profile = profile_of(run)
    groups: dict[str, list[str]] = {}
    unknown: list[str] = []
    for metric in sorted(run.metric_names):
        equivalent = metric if profile.is_verl else verl_equivalent(profile, metric)
        entry = registry.lookup(equivalent) if equivalent else None
        if entry is None:
            unknown.append(metric)
        else:
            groups.setdefault(entry.id, []).append(metric)
    out = []
    for entry in registry.entries:
        if entry.id not in groups:
            continue
        out.append(
            {
                "entry": entry.id,
                "concept": entry.concept,
                "meaning": entry.meaning,
                "unit": entry.unit,
                "metrics": [metric_row(run, m, entry, registry) for m in groups[entry.id]],
            }
        )
    return {
        "run": run.id,
        "source": run.source.path,
        "framework": profile.name,
        "verl_version": run.meta.get("verl_version"),
        "algorithm": run.meta.get("algorithm"),
        "groups": out,
        "unknown": {"count": len(unknown), "names": unknown},
    }


# ---- rendering ---------------------------------------------------------------------------------
def _key_view(d: dict[str, Any]) -> Group:
    parts: list[Any] = [
        Text.assemble((d["key"], "bold cyan"), ("  ", ""), (f"[{d['entry']}]", "dim")),
        Text(d["meaning"]),
    ]
    table = Table(show_header=False, show_edge=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    table.add_row("concept", ", ".join(d["concepts"]) or d["concept"])
    if d.get("framework"):
        equivalent = f" (verl's {d['verl_equivalent']})" if d["verl_equivalent"] else ""
        table.add_row("framework", f"{d['framework']}{equivalent}")
        if d["framework_note"]:
            table.add_row("note", d["framework_note"])
    table.add_row("unit", d["unit"] or "–")
    table.add_row("versions", d["versions"])
    table.add_row("trainers", ", ".join(d["trainers"]) or "–")
    table.add_row("names", ", ".join(d["keys"] + d["patterns"]))
    for r in d["renames"]:
        table.add_row(
            "renamed", f"{r['old']} → {r['new']}" + (f" ({r['note']})" if r["note"] else "")
        )
    if d["nan"]:
        table.add_row("NaN means", d["nan"])
    table.add_row("source", d["source"])
    parts.append(table)
    for h in d["healthy"]:
        algo = "".join(f"; {a}: {r}" for a, r in h["by_algorithm"].items())
        parts.append(Text(f"healthy {h['label']}: {h['healthy']}{algo} ({h['unit'] or '–'})"))
        parts.append(Text(f"  {h['rule']}", style="dim"))
        parts.append(Text(f"  source: {h['source']}", style="dim"))
    for r in d["ranges"]:
        parts.append(Text(f"healthy {r['key']}: {r['healthy']}"))
        parts.append(Text(f"  source: {r['source']}", style="dim"))
    for trap in d["traps"] + [
        f"{t['pattern']} {t['when']}: {t['meaning']}" for t in d["value_traps"]
    ]:
        parts.append(Text(f"trap: {trap}", style="yellow"))
    if d["diagnoses"]:
        parts.append(
            Text("diagnoses: " + ", ".join(f"{x['code']} {x['name']}" for x in d["diagnoses"]))
        )
    return Group(*parts)


def _md(text: str) -> str:
    return text.replace("|", "\\|")


def _key_markdown(d: dict[str, Any]) -> str:
    lines = [f"# `{d['key']}`", "", d["meaning"], ""]
    lines += [
        f"- **concept:** {', '.join(d['concepts']) or d['concept']}",
        *(
            [
                f"- **framework:** {d['framework']}"
                + (f" (verl's `{d['verl_equivalent']}`)" if d["verl_equivalent"] else "")
            ]
            + ([f"- **note:** {d['framework_note']}"] if d["framework_note"] else [])
            if d.get("framework")
            else []
        ),
        f"- **unit:** {d['unit'] or '–'}",
        f"- **versions:** {d['versions']}",
        f"- **trainers:** {', '.join(d['trainers']) or '–'}",
        f"- **names:** {', '.join(f'`{n}`' for n in d['keys'] + d['patterns'])}",
    ]
    for r in d["renames"]:
        note = f" ({r['note']})" if r["note"] else ""
        lines.append(f"- **renamed:** `{r['old']}` → `{r['new']}`{note}")
    if d["nan"]:
        lines.append(f"- **NaN means:** {d['nan']}")
    lines.append(f"- **source:** {d['source']}")
    if d["healthy"] or d["ranges"]:
        lines += ["", "## Healthy range", ""]
        for h in d["healthy"]:
            algo = "".join(f"; {a}: {r}" for a, r in h["by_algorithm"].items())
            lines.append(f"- {h['label']}: {h['healthy']}{algo}. {h['rule']} ({h['source']})")
        for r in d["ranges"]:
            lines.append(f"- `{r['key']}`: {r['healthy']} ({r['source']})")
    traps = d["traps"] + [f"`{t['pattern']}` {t['when']}: {t['meaning']}" for t in d["value_traps"]]
    if traps:
        lines += ["", "## Traps", ""] + [f"- {t}" for t in traps]
    if d["diagnoses"]:
        lines += ["", "## Diagnoses that read it", ""]
        lines += [f"- {x['code']} `{x['name']}`: {x['title']}" for x in d["diagnoses"]]
    return "\n".join(lines) + "\n"


_STYLE = {"ok": "green", "low": "red", "high": "red", "constant": "red", "not finite": "red"}


def _runs_view(d: dict[str, Any], width: int = 120) -> Group:
    """One table per run; under 110 columns each note goes under its key instead of a column."""
    narrow = width < 110
    parts: list[Any] = []
    for run in d["runs"]:
        table = Table(title=Text(f"{run['source']} ({run['run']})"), show_lines=False)
        # the family heads its rows (a column of its own squeezes the values out); long keys
        # and notes fold
        columns = ("key", "last", "median", "healthy", "verdict", *(() if narrow else ("note",)))
        for column in columns:
            table.add_column(column, overflow="fold")
        for group in run["groups"]:
            table.add_row(Text(group["entry"], style="bold"))
            for row in group["metrics"]:
                median = "–" if row["median"] is None else _num(row["median"])
                key = Text("  " + row["key"])
                if narrow and row["note"]:
                    key.append("\n    " + row["note"], style="dim")
                cells = [
                    key,
                    Text(row["last_text"]),
                    Text(median),
                    Text(row["healthy"]),
                    Text(row["verdict"], style=_STYLE.get(row["verdict"], "dim")),
                ]
                table.add_row(*cells, *(() if narrow else (Text(row["note"]),)))
        parts.append(table)
        unknown = run["unknown"]
        if unknown["count"]:
            parts.append(
                Text(f"{unknown['count']} keys not in the registry: " + ", ".join(unknown["names"]))
            )
        else:
            parts.append(Text("every key is in the registry", style="dim"))
    if not d["runs"]:
        parts.append(Text("no runs"))
    return Group(*parts)


def _num(x: float) -> str:
    from logscope.health import num

    return num(x)


def _runs_markdown(d: dict[str, Any]) -> str:
    lines: list[str] = []
    for run in d["runs"]:
        lines += [f"# {_md(run['source'])} (`{run['run']}`)", ""]
        lines += [
            "| family | key | last | median | healthy | verdict | note |",
            "|---|---|---|---|---|---|---|",
        ]
        for group in run["groups"]:
            for row in group["metrics"]:
                median = "–" if row["median"] is None else _num(row["median"])
                cells = (group["entry"], f"`{row['key']}`", row["last_text"], median,
                         row["healthy"], row["verdict"], row["note"])  # fmt: skip
                lines.append("| " + " | ".join(_md(c) for c in cells) + " |")
        unknown = run["unknown"]
        lines += ["", f"Keys not in the registry: {unknown['count']}"]
        lines += [f"- `{n}`" for n in unknown["names"]]
        lines.append("")
    return "\n".join(lines) + "\n"
