"""`logscope compare A B [...]`: key-metric deltas, divergence step and config diff."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from logscope.cli.common import (
    ConfigOption,
    FailOn,
    FailOnOption,
    FormatOption,
    NoCacheOption,
    OutputFormat,
    OutputOption,
    StoreOption,
    emit,
    same_file,
    user_errors,
)
from logscope.exceptions import LogscopeError
from logscope.present import DASH, fmt_value


def compare(
    runs: Annotated[
        list[str],
        typer.Argument(
            metavar="RUN...",
            help="Two or more logs (or stored run ids); the first is the reference.",
        ),
    ],
    format: FormatOption = OutputFormat.rich,
    output: OutputOption = None,
    fail_on: FailOnOption = FailOn.never,
    store: StoreOption = None,
    no_cache: NoCacheOption = False,
    config: ConfigOption = None,
) -> None:
    """Compare runs against the first: key metrics with deltas, where they part, config diff.

    With --fail-on, every run is also analysed, and the exit code is 1 when one of them has a
    finding at or above that severity (e.g. a candidate run in CI). Exit 2: fewer than two runs.

    Example: logscope compare verl_baseline.log verl_tuned.log --format markdown -o diff.md
    """
    import json

    from logscope.compare import compare_runs
    from logscope.store import Store

    with user_errors():
        if output is not None and any(same_file(output, Path(r)) for r in runs):
            raise LogscopeError(f"--output {output} is one of the inputs; refusing to overwrite it")
        st = Store(store)
        loaded = []
        for item in runs:
            if not Path(item).exists() and (stored := st.get_run(item)) is not None:
                loaded.append(stored)
                continue
            loaded += st.load(item, use_cache=not no_cache)
        if len(loaded) < 2:
            raise LogscopeError(
                f"compare needs at least two runs; {', '.join(runs)} gave {len(loaded)}"
            )
        cmp = compare_runs(loaded)
        emit(
            format,
            output,
            lambda console: render_compare(cmp, console),
            json=lambda: json.dumps(cmp.to_dict(), indent=2, allow_nan=False),
            markdown=cmp.to_markdown,
            html=cmp.to_html,
        )
    if fail_on != FailOn.never:
        from logscope import settings
        from logscope.analyze import analyze_run

        with user_errors(), settings.using(config):
            failing = any(analyze_run(run).fails(fail_on.value) for run in loaded)
        if failing:
            raise typer.Exit(1)


def _num(value: float | None) -> str:
    return fmt_value(value, digits=4, missing=DASH)


def render_compare(cmp, console: Console) -> None:  # type: ignore[no-untyped-def]
    """The compare table, divergence and config diff (log-derived text is never markup)."""
    table = Table(title="Key metrics (median of the last 20%; validation: last value)")
    table.add_column("metric", style="bold")
    for i, label in enumerate(cmp.labels):
        table.add_column(Text(label + (" (ref)" if i == 0 else "")), justify="right")
    for row in cmp.rows:
        cells: list[Text] = []
        for i, value in enumerate(row.values):
            cell = Text(_num(value))
            delta, pct = row.deltas[i], row.pct[i]
            if i and delta is not None:
                change = f" {delta:+.3g}" + (f" ({pct:+.1f}%)" if pct is not None else "")
                good = row.better * delta
                style = "green" if good > 0 else "red" if good < 0 else "dim"
                cell.append(change, style=style)
            cells.append(cell)
        table.add_row(Text(row.label), *cells)
    console.print(table)
    for d in cmp.divergence:
        label = cmp.labels[cmp.run_ids.index(d.run_id)]
        console.print(Text(d.sentence(label), style="" if d.step is not None else "dim"))
    if not all(cmp.config_known):
        console.print(Text("config diff: some runs have no config dump", style="dim"))
    elif not cmp.config_diff:
        console.print(Text("config: identical", style="dim"))
    else:
        diff = Table(title="Config diff")
        diff.add_column("key", overflow="fold")
        for label in cmp.labels:
            diff.add_column(Text(label), overflow="fold")
        for r in cmp.config_diff:
            diff.add_row(Text(r.key), *(Text(str(v)) for v in r.values))
        console.print(diff)
