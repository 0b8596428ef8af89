"""`logscope rules [CODE]`: the diagnosis catalogue, or one entry of it."""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Annotated, Any

import typer
from rich.console import Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from logscope import catalogue, settings
from logscope.cli.common import ConfigOption, OutputOption, emit, user_errors
from logscope.detector import CATALOGUE_SECTIONS


class RulesFormat(StrEnum):
    rich = "rich"
    json = "json"
    markdown = "markdown"


def rules(
    code: Annotated[
        str | None,
        typer.Argument(help="A diagnosis code (LS010) or name (cuda-oom); all when omitted."),
    ] = None,
    format: Annotated[
        RulesFormat, typer.Option("--format", "-f", help="Output format.")
    ] = RulesFormat.rich,
    output: OutputOption = None,
    config: ConfigOption = None,
) -> None:
    """List logscope's diagnoses, or explain one.

    Without CODE: a table of code, name, default severity, what it reads, and title.
    With CODE (or name): its parameters (default, valid values, and the value the settings
    file in use sets: --config, or the nearest logscope.toml / [tool.logscope] upward from the
    working directory), then the entry's sections (what it detects, why it matters, example,
    advice, known false positives, references). Unknown code: exit 2.

    Example: logscope rules cuda-oom --format json
    """
    with user_errors(), settings.using(config):
        found = catalogue.entries() if code is None else catalogue.entry(code)
        if code is not None:
            found["settings"] = _settings_for(found["code"])
    if code is None:
        view, markdown = _table, catalogue.render_markdown
    else:
        view, markdown = _panels, lambda: catalogue.render_entry_markdown(found, level=1)
    emit(
        format,
        output,
        lambda console: console.print(view(found)),
        json=lambda: json.dumps(found, indent=2, ensure_ascii=False, default=str),
        markdown=markdown,
    )


def _settings_for(code: str) -> dict[str, Any] | None:
    """What the settings file in use changes for diagnosis `code` (None: nothing)."""
    current = settings.for_input(None)
    params, severity = current.params.get(code, {}), current.severity.get(code)
    if current.path is None or not (params or severity):
        return None
    return {"file": str(current.path), "parameters": params, "severity": severity}


def _table(items: list[dict[str, Any]]) -> Table:
    table = Table(title="logscope diagnoses", show_lines=False)
    table.add_column("Code", style="bold", no_wrap=True)
    table.add_column("Name", style="cyan", no_wrap=True)
    table.add_column("Severity")
    table.add_column("Reads")
    table.add_column("Title")
    for item in items:
        table.add_row(
            item["code"],
            item["name"],
            item["default_severity"],
            catalogue.reads_label(item),
            item["title"],
        )
    return table


def _panels(item: dict[str, Any]) -> Group:
    from rich.markdown import Markdown  # ~50 ms of imports (markdown-it, pygments): on use

    head = Text.assemble(
        (f"{item['code']} ", "bold"),
        (item["name"], "bold cyan"),
        (f"  [{item['default_severity']}]  ", "dim"),
        item["title"],
    )
    parts: list = [head, Text(item["summary"])]
    changed = item.get("settings") or {}
    if changed.get("severity"):
        parts.append(Text(f"Severity: {changed['severity']} (set in {changed['file']})"))
    if item["parameters"]:
        current = changed.get("parameters", {})
        table = Table(
            title="Parameters",
            title_justify="left",
            caption=f"* set in {changed['file']}" if current else None,
            caption_justify="left",
            show_edge=False,
        )
        for column in ("Parameter", "Default", "Valid values", "Current"):
            table.add_column(column)
        for name, default in item["parameters"].items():
            value = f"{current[name]!r} *" if name in current else repr(default)
            table.add_row(name, repr(default), item["parameter_ranges"].get(name, ""), value)
        parts.append(table)
    for title in CATALOGUE_SECTIONS:
        body = item["sections"][title]
        content = Text(body) if title == "Example" else Markdown(body)
        parts.append(Panel(content, title=title, title_align="left"))
    return Group(*parts)
