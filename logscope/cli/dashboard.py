"""`logscope dashboard`: ingest the given logs into the store, then serve the Streamlit app."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer

from logscope.cli.common import StoreOption, err_console, user_errors
from logscope.exceptions import OptionalDependencyMissing


def app_path() -> Path:
    """The packaged app's entry script (app/ installs as logscope.app)."""
    spec = importlib.util.find_spec("logscope.app")
    if spec is None or not spec.submodule_search_locations:
        raise OptionalDependencyMissing("logscope.app", "dashboard", "logscope dashboard")
    return Path(next(iter(spec.submodule_search_locations))) / "app.py"


#: Streamlit runs each browser session's script in its own thread. The first two sessions after
#: start-up (two tabs, a reload) then import pandas/plotly at the same time, and one of them can
#: see a partly initialised pandas ("partially initialized module 'pandas' has no attribute
#: 'Series'"). Importing them in the server process before it serves avoids the race.
SERVE = (
    "import sys, pandas, plotly.graph_objects, polars\n"
    "from streamlit.web import cli\n"
    "sys.argv = ['streamlit', *sys.argv[1:]]\n"
    "sys.exit(cli.main())"
)


def streamlit_command(port: int, host: str) -> list[str]:
    return [
        sys.executable,
        "-c",
        SERVE,
        "run",
        str(app_path()),
        "--server.port",
        str(port),
        "--server.address",
        host,
        "--server.headless",
        "true",
        "--browser.gatherUsageStats",
        "false",
        "--client.toolbarMode",
        "minimal",  # no "Deploy" button: this is a local tool
    ]


def dashboard(
    paths: Annotated[
        # str, not Path: Path("wandb://e/p/id") would collapse the URI's "//"
        list[str] | None,
        typer.Argument(
            metavar="[PATH]...",
            help="Logs to add to the store first (they are preselected in the app).",
        ),
    ] = None,
    store: StoreOption = None,
    port: Annotated[int, typer.Option("--port", help="Port to serve on.")] = 8501,
    host: Annotated[
        str, typer.Option("--host", help="Address to bind (127.0.0.1: this machine only).")
    ] = "127.0.0.1",
) -> None:
    """Open the dashboard: curves with the findings marked, advice, config, compare, live.

    Example: logscope dashboard verl_baseline.log verl_tuned.log --port 8501
    """
    from logscope.store import Store

    with user_errors():
        for package in ("streamlit", "plotly"):
            if importlib.util.find_spec(package) is None:
                raise OptionalDependencyMissing(package, "dashboard", "logscope dashboard")
        st = Store(store)
        ids: list[str] = []
        for path in paths or []:
            ids += [run.id for run in st.load(path)]
        cmd = streamlit_command(port, host)
    env = dict(os.environ)
    env["LOGSCOPE_STORE"] = str(st.root.resolve())
    env["LOGSCOPE_RUNS"] = ",".join(ids)
    err_console.print(
        f"logscope dashboard: {len(ids)} run(s) from {len(paths or [])} path(s); "
        f"store {st.root}; http://{host}:{port}",
        highlight=False,
        markup=False,
    )
    try:
        code = subprocess.call(cmd, env=env)
    except KeyboardInterrupt:
        code = 0
    raise typer.Exit(code)
