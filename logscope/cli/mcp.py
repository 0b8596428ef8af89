"""`logscope mcp`: serve logscope's tools to coding agents (Model Context Protocol, stdio)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from logscope.cli.common import StoreOption, user_errors
from logscope.exceptions import OptionalDependencyMissing


def mcp(
    allow_dir: Annotated[
        list[Path] | None,
        typer.Option(
            "--allow-dir",
            metavar="DIR",
            help="A folder the tools may read (repeatable; default: the working directory). "
            "Paths are resolved, symlinks followed; anything outside is refused.",
        ),
    ] = None,
    store: StoreOption = None,
) -> None:
    """Serve analyze, explain, check, compare, tail_status and query as MCP tools over stdio.

    For coding agents (Claude Code, Cursor, …): each tool returns what the command prints with
    --format json (analyze also --format verdict), and errors carry the command's message;
    query is offered when logscope[query] is installed. Needs the `mcp` extra:
    pip install 'logscope[mcp]'. See docs/agents.md for the client configuration.

    Example: logscope mcp --allow-dir ~/runs --allow-dir .
    """
    with user_errors():
        try:
            import mcp as _sdk  # noqa: F401
        except ImportError as exc:
            raise OptionalDependencyMissing("mcp", "mcp", "logscope mcp") from exc
        from logscope.mcp_server import AllowedDirs

        AllowedDirs.of(allow_dir)  # a missing folder is an error before serving
    from logscope.mcp_server import serve

    serve(allow_dir, store)
