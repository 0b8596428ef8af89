"""`logscope analyze`: read logs, run every detector, print the report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from logscope.cli.common import (
    FailOn,
    OutputFormat,
    emit_reports,
    progress_bar,
    same_file,
    split_codes,
    stdin_as_file,
    user_errors,
)
from logscope.exceptions import LogscopeError
from logscope.model import Source


def analyze(
    paths: Annotated[
        # str, not Path: Path("wandb://e/p/id") would collapse the URI's "//"
        list[str],
        typer.Argument(
            help="verl console logs, pasted excerpts or other supported runs; - reads stdin."
        ),
    ],
    format: Annotated[
        OutputFormat, typer.Option("--format", "-f", help="Output format.")
    ] = OutputFormat.rich,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write the report to FILE.")
    ] = None,
    fail_on: Annotated[
        FailOn,
        typer.Option("--fail-on", help="Exit 1 when a finding is at or above this severity."),
    ] = FailOn.error,
    only: Annotated[
        list[str] | None,
        typer.Option("--only", help="Run only these codes/names (comma-separated)."),
    ] = None,
    skip: Annotated[
        list[str] | None, typer.Option("--skip", help="Skip these codes/names (comma-separated).")
    ] = None,
    source: Annotated[
        str | None, typer.Option("--source", help="Force the reader (e.g. verl-console).")
    ] = None,
    store: Annotated[
        Path | None,
        typer.Option(
            "--store", envvar="LOGSCOPE_STORE", help="Store folder (default: ~/.cache/logscope)."
        ),
    ] = None,
    no_cache: Annotated[
        bool, typer.Option("--no-cache", help="Parse again; don't read or write the store.")
    ] = False,
) -> None:
    """Diagnose verl runs: what went wrong, where, and which parameter to change.

    Exit codes: 0 nothing at or above --fail-on, 1 findings at or above it, 2 nothing could be
    read (an input that cannot be read among others is reported as such, and the rest analysed).

    Example: logscope analyze verl_tuned.log --format json -o report.json

    A pasted excerpt: pbpaste | logscope analyze -
    """
    from logscope.analyze import analyze_paths

    with user_errors():
        if output is not None and any(same_file(output, Path(p)) for p in paths):
            raise LogscopeError(f"--output {output} is one of the inputs; refusing to overwrite it")
        reports = []
        with progress_bar(enabled=format == OutputFormat.rich or output is not None) as progress:
            for path in paths:
                with stdin_as_file(path) as (real, shown):
                    found = analyze_paths(
                        [real],
                        source=source,
                        only=split_codes(only),
                        skip=split_codes(skip),
                        store_dir=store,
                        use_cache=not no_cache and real == path,
                        progress=progress,
                    )
                if real != path:  # standard input: name it as the user sees it
                    for report in found:
                        report.run.source = Source(report.run.source.kind, shown)
                reports += found
        if not any(r.readable for r in reports):  # nothing to report on
            raise LogscopeError(
                "\n".join(f"{r.run.source.path}: {e}" for r in reports for e in r.errors)
            )
        emit_reports(reports, format, output)
    if any(r.fails(fail_on.value) for r in reports):
        raise typer.Exit(1)
