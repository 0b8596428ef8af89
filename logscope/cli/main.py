"""The Typer app: one module per command, registered here by name.

A command's module is imported when the command is looked up (run, or listed by `--help`), not
when the app is built: `logscope analyze` does not pay for the imports of `tail`, `rules`,
`query` or `dashboard` (rich's live display, the catalogue, ...).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, MutableMapping
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

#: command name → its module under logscope.cli (the function has the command's name; a module's
#: `CONTEXT_SETTINGS`, when it has one, are the command's)
COMMANDS = {
    "analyze": "analyze",
    "rules": "rules",
    "tail": "tail",
    "check": "check",
    "dashboard": "dashboard",
    "compare": "compare",
    "explain": "explain",
    "mcp": "mcp",
    "query": "query",
}


class LazyCommands(MutableMapping[str, Any]):
    """A group's commands by name, each built from its module on first lookup."""

    def __init__(self, app: typer.Typer, names: dict[str, str]) -> None:
        self._app = app
        self._modules = dict(names)
        self._built: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._built:
            if name not in self._modules:
                raise KeyError(name)
            self._built[name] = _build(self._app, name, self._modules[name])
        return self._built[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        self._modules.pop(name, None)
        del self._built[name]

    def __contains__(self, name: object) -> bool:
        return name in self._modules or name in self._built

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys([*self._modules, *self._built]))

    def __len__(self) -> int:
        return len(dict.fromkeys([*self._modules, *self._built]))


def _build(app: typer.Typer, name: str, module: str) -> Any:
    """The click command of `logscope.cli.<module>.<name>`, as `app.command(name)` makes it."""
    mod = importlib.import_module(f"logscope.cli.{module}")
    one = typer.Typer()
    one.command(name, context_settings=getattr(mod, "CONTEXT_SETTINGS", None))(getattr(mod, name))
    return typer.main.get_command_from_info(
        one.registered_commands[0],
        pretty_exceptions_short=app.pretty_exceptions_short,
        rich_markup_mode=app.rich_markup_mode,
    )


class LazyGroup(TyperGroup):
    """The root group: its commands are `COMMANDS`, imported on use (see `LazyCommands`)."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        lazy = LazyCommands(app, COMMANDS)
        for name, command in self.commands.items():
            lazy[name] = command
        self.commands = lazy


app = typer.Typer(
    name="logscope",
    help="Find what went wrong in a verl RL run, where, and which parameter to change.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=LazyGroup,
)


def _print_version(value: bool) -> None:
    if value:
        from logscope import __version__

        typer.echo(f"logscope {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Find what went wrong in a verl RL run, where, and which parameter to change."""


def main() -> None:
    """Console-script entry point: one BLAS thread (`logscope.blas`), the command, an exit."""
    import gc

    from logscope.blas import single_threaded

    single_threaded()
    try:
        app()
    finally:
        # The process ends here: the collections of interpreter shutdown would walk every object
        # still alive again, only to free memory the OS takes back at once (0.12-0.14 s after
        # an analysis; 0.03 s frozen). Objects are still released, and files closed, as usual.
        gc.freeze()
