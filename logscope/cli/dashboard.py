"""`logscope dashboard`: ingest the given logs into the store, then serve the Streamlit app."""

from __future__ import annotations

import importlib.util
import ipaddress
import os
import secrets
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer

from logscope.cli.common import StoreOption, err_console, user_errors
from logscope.exceptions import LogscopeError, OptionalDependencyMissing


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


#: Settings the CLI passes to the Streamlit process (read by logscope.app._common). The token
#: travels only here, never on a command line.
ENV_EXPOSED = "LOGSCOPE_DASHBOARD_EXPOSED"
ENV_TOKEN = "LOGSCOPE_DASHBOARD_TOKEN"
ENV_ALLOW_DIRS = "LOGSCOPE_ALLOW_DIRS"  # os.pathsep-separated, resolved
ENV_MAX_UPLOAD_MB = "LOGSCOPE_MAX_UPLOAD_MB"
ENV_UPLOAD_QUOTA_MB = "LOGSCOPE_UPLOAD_QUOTA_MB"
SHARE_SETTINGS = (ENV_EXPOSED, ENV_TOKEN, ENV_ALLOW_DIRS, ENV_MAX_UPLOAD_MB, ENV_UPLOAD_QUOTA_MB)
DEFAULT_UPLOAD_QUOTA_MB = 2000  # a shared dashboard's uploads folder, unless --upload-quota-mb
MIN_TOKEN_CHARS = 16
SAFE_START = "logscope dashboard --host 0.0.0.0 --allow-dir /runs /runs/verl_run.log"


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 or localhost: only this machine can connect."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False


def _refuse(message: str) -> typer.Exit:
    err_console.print(
        f"logscope dashboard: {message}", highlight=False, markup=False, soft_wrap=True
    )
    return typer.Exit(2)


def streamlit_command(
    port: int, host: str, exposed: bool = False, max_upload_mb: int = 200
) -> list[str]:
    shared = [
        # explicit, so a ~/.streamlit/config.toml cannot turn them off for a shared server
        "--server.enableXsrfProtection",
        "true",
        "--server.enableCORS",
        "true",
        "--client.showErrorDetails",
        "type",  # no tracebacks for teammates
    ]
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
        "--server.maxUploadSize",
        str(max_upload_mb),
        *(shared if exposed else []),
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
    allow_dir: Annotated[
        list[Path] | None,
        typer.Option(
            "--allow-dir",
            help="A folder the app may read logs from when a path is typed into it "
            "(repeatable; symlinks followed; required off loopback).",
        ),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            envvar=ENV_TOKEN,
            show_default=False,
            help="Access token a shared dashboard asks for (default: generated and printed "
            "once at start).",
        ),
    ] = None,
    exposed: Annotated[
        bool,
        typer.Option(
            "--exposed",
            envvar=ENV_EXPOSED,
            help="Shared mode (token, --allow-dir, upload quota) even on loopback, e.g. behind "
            "a reverse proxy on this machine. Any other address than loopback implies it.",
        ),
    ] = False,
    max_upload_mb: Annotated[
        int, typer.Option("--max-upload-mb", min=1, help="Largest file the app accepts.")
    ] = 200,
    upload_quota_mb: Annotated[
        int | None,
        typer.Option(
            "--upload-quota-mb",
            min=1,
            help=f"Total size of the store's uploads folder (shared mode: "
            f"{DEFAULT_UPLOAD_QUOTA_MB} by default).",
        ),
    ] = None,
) -> None:
    """Open the dashboard: curves with the findings marked, advice, config, compare, live.

    Bound to loopback (the default) it is for this machine only. Bound to any other address
    it is shared: every browser session needs the access token, paths typed into the app are
    confined to the --allow-dir folders, and uploads count against a quota. There is no TLS:
    put a shared dashboard behind the team's reverse proxy.

    Example: logscope dashboard verl_baseline.log verl_tuned.log --port 8501

    Example: logscope dashboard --host 0.0.0.0 --allow-dir /runs /runs/verl_tuned.log
    """
    from logscope.store import Store

    exposed = exposed or not is_loopback(host)
    if exposed and not allow_dir:
        where = f"--host {host}" if not is_loopback(host) else "--exposed"
        raise _refuse(
            f"{where} lets other machines use the dashboard, and it would read any file "
            "typed into it. Name the folders it may read with --allow-dir, e.g.\n"
            f"  {SAFE_START}\n"
            "Every browser then needs the access token (generated and printed at start, or "
            f"--token / {ENV_TOKEN}). There is no TLS: put it behind the team's reverse proxy."
        )
    allowed: list[Path] = []
    for folder in allow_dir or []:
        real = folder.expanduser().resolve()
        if not real.is_dir():
            raise _refuse(f"--allow-dir {folder}: not a folder")
        allowed.append(real)
    if token is not None and len(token) < MIN_TOKEN_CHARS:
        raise _refuse(
            f"the access token must have at least {MIN_TOKEN_CHARS} characters "
            "(leave --token out to have one generated)"
        )
    generated = exposed and token is None
    if generated:
        token = secrets.token_urlsafe(32)

    with user_errors():
        for package in ("streamlit", "plotly"):
            if importlib.util.find_spec(package) is None:
                raise OptionalDependencyMissing(package, "dashboard", "logscope dashboard")
        st = Store(store)
        ids: list[str] = []
        for path in paths or []:
            ids += [run.id for run in st.load(path)]
        cmd = streamlit_command(port, host, exposed=exposed, max_upload_mb=max_upload_mb)
        check_port_free(host, port)
    env = {k: v for k, v in os.environ.items() if k not in SHARE_SETTINGS}
    env["LOGSCOPE_STORE"] = str(st.root.resolve())
    env["LOGSCOPE_RUNS"] = ",".join(ids)
    env[ENV_MAX_UPLOAD_MB] = str(max_upload_mb)
    if exposed:
        env[ENV_EXPOSED] = "1"
        upload_quota_mb = upload_quota_mb or DEFAULT_UPLOAD_QUOTA_MB
    if token is not None:  # also on loopback when one was given: then it is asked for too
        env[ENV_TOKEN] = token
    if upload_quota_mb is not None:
        env[ENV_UPLOAD_QUOTA_MB] = str(upload_quota_mb)
    if allowed:
        env[ENV_ALLOW_DIRS] = os.pathsep.join(map(str, allowed))
    url = f"http://{_url_host(host)}:{port}"
    err_console.print(
        f"logscope dashboard: {len(ids)} run(s) from {len(paths or [])} path(s); "
        f"store {st.root}; {url}",
        highlight=False,
        markup=False,
    )
    if exposed:
        err_console.print(
            "shared mode: every browser needs the access token; typed paths are confined to "
            f"{', '.join(map(str, allowed))}; no TLS (use the team's reverse proxy)",
            highlight=False,
            markup=False,
        )
    if generated:  # the only time the token is shown
        err_console.print(
            f"open (once per browser session): {url}/?token={token}",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
    raise typer.Exit(serve(cmd, env))


def check_port_free(host: str, port: int) -> None:
    """LogscopeError naming the port when something already listens on it (exit 2)."""
    bind = "" if host in ("0.0.0.0", "::") else host
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds
        try:
            probe.bind((bind, port))
        except OSError as exc:
            raise LogscopeError(
                f"port {port} on {host} is in use ({exc.strerror}); choose another with --port"
            ) from None


def serve(cmd: list[str], env: dict[str, str]) -> int:
    """Run Streamlit until it exits or logscope gets SIGTERM/SIGINT, which stop it too (so the
    port is free again when `logscope dashboard` returns)."""
    child = subprocess.Popen(cmd, env=env)

    def stop(signum: int, frame: object) -> None:
        child.terminate()

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        code = child.wait()
    finally:
        if child.poll() is None:
            child.terminate()
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0 if code in (0, -signal.SIGTERM, -signal.SIGINT) else code


def _url_host(host: str) -> str:
    """The host part of the URL to open: this machine's name for a wildcard address."""
    if host in ("", "0.0.0.0", "::"):
        return socket.gethostname()
    return f"[{host}]" if ":" in host else host
