"""`logscope analyze`: read logs, run every detector, print the report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from logscope.cli.common import (
    ConfigOption,
    FailOn,
    FailOnOption,
    FormatOption,
    NoCacheOption,
    OnlyOption,
    OutputFormat,
    OutputOption,
    SkipOption,
    SourceOption,
    StoreOption,
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
            metavar="PATH...",
            help="Logs, JSONL, TensorBoard or W&B runs, CSV exports, or folders of them; - reads "
            "standard input (a pasted excerpt).",
        ),
    ],
    format: FormatOption = OutputFormat.rich,
    output: OutputOption = None,
    fail_on: FailOnOption = FailOn.error,
    only: OnlyOption = None,
    skip: SkipOption = None,
    source: SourceOption = None,
    store: StoreOption = None,
    no_cache: NoCacheOption = False,
    config: ConfigOption = None,
) -> None:
    """Diagnose verl runs: what went wrong, where, and which parameter to change.

    Exit codes: 0 nothing at or above --fail-on, 1 findings at or above it, 2 nothing could be
    read (an input that cannot be read among others is reported as such, and the rest analysed).

    Example: logscope analyze verl_tuned.log --format json -o report.json

    A pasted excerpt: pbpaste | logscope analyze -
    """
    from logscope import settings
    from logscope.analyze import analyze_paths

    with user_errors(), settings.using(config):
        if output is not None and any(same_file(output, Path(p)) for p in paths):
            raise LogscopeError(f"--output {output} is one of the inputs; refusing to overwrite it")
        reports = []
        with progress_bar(enabled=format == OutputFormat.rich or output is not None) as progress:
            for path in paths:
                with (
                    stdin_as_file(path) as (real, shown),
                    # standard input has no folder of its own: the working directory's settings
                    settings.using(None if real == path or config else settings.find(Path.cwd())),
                ):
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
