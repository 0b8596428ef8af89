"""The `logscope` command line (Typer). Thin: every command calls one library function."""

from logscope.cli.main import app, main

__all__ = ["app", "main"]
