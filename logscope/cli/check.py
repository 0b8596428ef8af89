"""`logscope check`: lint a verl launch script, command line, YAML config or log before launch."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Annotated

import typer

from logscope.cli.common import (
    ConfigOption,
    FailOn,
    FailOnOption,
    FormatOption,
    OutputFormat,
    OutputOption,
    emit_reports,
    same_file,
    user_errors,
    write_output,
)
from logscope.exceptions import LogscopeError

#: the newest verl release in logscope/data/verl_schema.json (a test keeps the two equal)
NEWEST_VERL = "0.9.1"

#: Typer settings so that `logscope check -- python3 -m verl… k=v` reaches us untouched.
CONTEXT_SETTINGS = {"allow_extra_args": True, "ignore_unknown_options": True}


def check(
    ctx: typer.Context,
    target: Annotated[
        list[str] | None,
        typer.Argument(
            help="A launch script, a YAML config or a log (`-`: a script on stdin); or, after "
            "`--`, a verl command line.",
            show_default=False,
        ),
    ] = None,
    format: FormatOption = OutputFormat.rich,
    output: OutputOption = None,
    fail_on: FailOnOption = FailOn.error,
    fix: Annotated[
        bool,
        typer.Option(
            "--fix",
            help="Print the script (or command) with the fewest suggested changes that clear "
            "the findings, made in place; for a YAML or log, the overrides. Never edits your file.",
        ),
    ] = False,
    verl_version: Annotated[
        str | None,
        typer.Option(
            "--verl-version",
            metavar="X.Y[.Z]",
            help=f"verl version whose defaults and config keys apply (default: {NEWEST_VERL}, the "
            "newest release logscope knows).",
        ),
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Check a verl config before launch: batch sizes, KL, GPU memory, GRPO group size, …

    Exit codes: 0 nothing at or above --fail-on, 1 findings at or above it, 2 could not run.

    Examples: logscope check run_grpo.sh;
    logscope check -- python3 -m verl.trainer.main_ppo data.train_batch_size=512 …
    """
    from logscope import settings
    from logscope.check import check_command, check_path, fix_reports, read_script

    args = list(target or []) + list(ctx.args)
    text = None  # the script's text, for --fix to edit in place
    with user_errors(), contextlib.ExitStack() as stack:
        args, late = _own_options(args)
        fix = fix or bool(late.get("fix"))
        format = OutputFormat(late.get("format", format))
        output = Path(late["output"]) if "output" in late else output
        fail_on = FailOn(late.get("fail_on", fail_on))
        verl_version = late.get("verl_version", verl_version)
        config = Path(late["config"]) if "config" in late else config
        stack.enter_context(settings.using(config))
        if not args:
            raise LogscopeError(
                "nothing to check: give a script/YAML/log path, or `-- python3 -m "
                "verl.trainer.main_ppo key=value …`"
            )
        if args == ["-"]:
            import sys

            from logscope.check import check_text

            text = sys.stdin.read()
            reports = check_text(text, path="<stdin>", version=verl_version)
        elif len(args) == 1 and (Path(args[0]).exists() or _names_a_file(args[0])):
            if output is not None and same_file(output, Path(args[0])):
                raise LogscopeError(f"--output {output} is the input; refusing to overwrite it")
            reports = check_path(args[0], version=verl_version)  # a missing file: "no such file"
            if fix and Path(args[0]).is_file():
                text = read_script(args[0])
        else:
            reports = check_command(args, version=verl_version)
        if fix:
            write_output(fix_reports(reports, text), output)
        else:
            emit_reports(reports, format, output)
    if any(r.fails(fail_on.value) for r in reports):
        raise typer.Exit(1)


def _names_a_file(arg: str) -> bool:
    """One word that is not a verl invocation: the user meant a file (which may be missing)."""
    from logscope.check import shell

    if any(c.isspace() for c in arg):
        return False  # a whole command line in one argument
    return shell.find_verl(shell.Command(argv=[arg])) is None


_LATE_OPTIONS = {
    "--fix": "fix",
    "--format": "format",
    "--output": "output",
    "--fail-on": "fail_on",
    "--verl-version": "verl_version",
    "--config": "config",
}


def _own_options(args: list[str]) -> tuple[list[str], dict[str, str]]:
    """Pull logscope's long options out of a command given after `--` (Hydra never uses them)."""
    rest: list[str] = []
    found: dict[str, str] = {}
    i = 0
    while i < len(args):
        name, eq, value = args[i].partition("=")
        if name in _LATE_OPTIONS:
            if name == "--fix":
                found["fix"] = "1"
            elif eq:
                found[_LATE_OPTIONS[name]] = value
            elif i + 1 < len(args):
                found[_LATE_OPTIONS[name]] = args[i + 1]
                i += 1
            else:
                raise LogscopeError(f"{name} needs a value")
            i += 1
            continue
        rest.append(args[i])
        i += 1
    for key, kind in (("format", OutputFormat), ("fail_on", FailOn)):
        if key in found:
            try:
                kind(found[key])
            except ValueError:
                choices = ", ".join(m.value for m in kind)
                raise LogscopeError(f"--{key.replace('_', '-')}: choose one of {choices}") from None
    return rest, found
