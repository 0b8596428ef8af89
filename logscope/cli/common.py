"""Shared CLI pieces: option types, error handling, progress, writing output."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from logscope.exceptions import LogscopeError

if TYPE_CHECKING:
    from rich.console import Console

    err_console: Console


def __getattr__(name: str) -> Any:
    """`err_console`, rich's console on stderr, made (and rich imported) on first use."""
    if name != "err_console":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from rich.console import Console

    console = globals()["err_console"] = Console(stderr=True)
    return console


def _err_console() -> Console:
    return __getattr__("err_console")


class OutputFormat(StrEnum):
    rich = "rich"
    json = "json"
    markdown = "markdown"
    html = "html"
    verdict = "verdict"  # compact JSON for agents (logscope.verdict); `analyze` and `check` only


class FailOn(StrEnum):
    info = "info"
    warning = "warning"
    error = "error"
    critical = "critical"
    never = "never"


# ---- options shared by the commands (declared once: same name, metavar and help everywhere) --
StoreOption = Annotated[
    Path | None,
    typer.Option(
        "--store",
        envvar="LOGSCOPE_STORE",
        metavar="DIR",
        help="Store folder (default: ~/.cache/logscope).",
    ),
]
NoCacheOption = Annotated[
    bool, typer.Option("--no-cache", help="Parse again; don't read or write the store.")
]
OutputOption = Annotated[
    Path | None,
    typer.Option("--output", "-o", metavar="FILE", help="Write to FILE instead of stdout."),
]
FormatOption = Annotated[OutputFormat, typer.Option("--format", "-f", help="Output format.")]
FailOnOption = Annotated[
    FailOn,
    typer.Option(
        "--fail-on",
        metavar="SEVERITY",
        help="Exit 1 when a finding is at or above SEVERITY: info, warning, error, critical, "
        "or never.",
    ),
]
OnlyOption = Annotated[
    list[str] | None,
    typer.Option(
        "--only",
        metavar="CODES",
        help="Run only these diagnoses: codes or names, comma-separated (LS010,kl-jump).",
    ),
]
SkipOption = Annotated[
    list[str] | None,
    typer.Option(
        "--skip", metavar="CODES", help="Skip these diagnoses: codes or names, comma-separated."
    ),
]
ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        metavar="FILE",
        help="Settings file: a logscope.toml, or a pyproject.toml with [tool.logscope] "
        "(default: the nearest one upward from the input, then from the working directory).",
    ),
]
SourceOption = Annotated[
    str | None,
    typer.Option(
        "--source",
        metavar="KIND",
        help="Force the reader: verl-console, verl-jsonl, tensorboard, wandb-offline, "
        "wandb-online, wandb-csv, table, hf-trainer-state, hf-trainer-log, roll-console, "
        "slime-console, skyrl-console, prime-rl-console, prime-rl-jsonl, nemo-rl-console or "
        "areal-console (docs/sources.md).",
    ),
]
FrameworkOption = Annotated[
    str | None,
    typer.Option(
        "--framework",
        metavar="NAME",
        help="Force the framework profile metrics are read through: verl, trl, openrlhf, roll, "
        "skyrl, slime, prime-rl, nemo-rl or areal (default: from the reader and the keys).",
    ),
]


def split_codes(values: list[str] | None) -> list[str] | None:
    """`--only LS001,kl-jump --only LS010` → ['LS001', 'kl-jump', 'LS010']."""
    if not values:
        return None
    return [c.strip() for v in values for c in v.split(",") if c.strip()]


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn a LogscopeError into a clear message on stderr and exit code 2."""
    try:
        yield
    except LogscopeError as exc:
        from rich.markup import escape

        _err_console().print(
            f"[bold red]logscope:[/] {escape(str(exc))}", markup=True, highlight=False
        )
        raise typer.Exit(2) from None


@contextmanager
def progress_bar(
    enabled: bool, counting: str = "bytes"
) -> Iterator[Callable[[int, int], None] | None]:
    """A progress bar on stderr, only when stderr is a terminal: bytes parsed, or (`counting`
    "runs") runs analysed."""
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        MofNCompleteColumn,
        Progress,
        TimeRemainingColumn,
    )

    runs = counting == "runs"
    with Progress(
        "analysing runs" if runs else "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn() if runs else DownloadColumn(),
        TimeRemainingColumn(),
        console=_err_console(),
        transient=True,
    ) as bar:
        task = bar.add_task(counting if runs else "parsing", total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


STDIN = "-"


@contextmanager
def stdin_as_file() -> Iterator[tuple[str, str]]:
    """(path to read, path to show) of standard input (`-`): spooled to a temporary file
    (readers need a file; it is never cached) and shown as `<stdin>`."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="logscope-stdin-") as tmp:
        spooled = Path(tmp) / "stdin.log"
        with spooled.open("wb") as fh:
            while block := sys.stdin.buffer.read(1 << 20):
                fh.write(block)
        yield str(spooled), "<stdin>"


def write_output(text: str, output: Path | None) -> None:
    """Write to `--output` (never over an input: the caller checks) or stdout."""
    if output is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text, encoding="utf-8")


def same_file(a: Path, b: Path) -> bool:
    """True when two paths name the same existing file (guards `--output` against inputs)."""
    try:
        return a.exists() and b.exists() and a.resolve() == b.resolve()
    except OSError:
        return False


#: the terminal width of rich output written to a file
FILE_WIDTH = 110


def emit(
    format: str,
    output: Path | None,
    rich: Callable[[Console], None],
    **texts: Callable[[], str],
) -> None:
    """Write one result in `format` to `--output` or stdout: `rich` prints it on a console (the
    terminal, or the file at a fixed width); `texts` give the other formats as text."""
    if format != OutputFormat.rich:
        if str(format) not in texts:
            offered = ", ".join(["rich", *texts])
            raise LogscopeError(f"--format {format} is not offered here; choose one of {offered}")
        write_output(texts[str(format)](), output)
        return
    from rich.console import Console

    if output is None:
        rich(Console())
    else:
        with output.open("w", encoding="utf-8") as fh:
            rich(Console(file=fh, width=FILE_WIDTH, force_terminal=False))


def emit_reports(reports: list, format: OutputFormat, output: Path | None) -> None:
    """Render reports in `format` to `--output` or stdout (rich goes to the terminal)."""
    from logscope.report import render_html, render_markdown, reports_to_json

    def rich(console: Console) -> None:
        from logscope.cli.render import render_report

        for report in reports:
            render_report(report, console)

    emit(
        format,
        output,
        rich,
        json=lambda: reports_to_json(reports),
        markdown=lambda: render_markdown(reports),
        html=lambda: render_html(reports),
        verdict=lambda: _verdict_json(reports),
    )


def _verdict_json(reports: list) -> str:
    from logscope import verdict

    one = len(reports) == 1
    return verdict.to_json(verdict.verdict(reports[0]) if one else verdict.fleet_verdict(reports))


def emit_fleet(
    reports: list, format: OutputFormat, output: Path | None, passed: list[str], details: bool
) -> None:
    """Render many runs: the triage table (and each report with `details`); JSON has both."""
    from logscope import fleet, verdict
    from logscope.report import render_fleet_html, render_fleet_markdown

    def rich(console: Console) -> None:
        from logscope.cli.render import render_fleet

        render_fleet(reports, console, passed, details)

    emit(
        format,
        output,
        rich,
        json=lambda: fleet.fleet_json(reports, passed),
        markdown=lambda: render_fleet_markdown(reports, passed, details),
        html=lambda: render_fleet_html(reports, passed, details),
        verdict=lambda: verdict.to_json(verdict.fleet_verdict(reports, passed)),
    )
