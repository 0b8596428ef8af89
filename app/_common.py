"""What every page shares: the store, cached loaders, the run selectors, finding helpers.

Loaders are cached keyed by store folder and run id. A run id is the content hash of what was
read, so a cached entry can never go stale. Runs and Reports are cached with
`st.cache_resource` (one shared, read-only object): under `st.cache_data` every cache hit
unpickles a copy, which for a 100,000-step run (7 M values, a 558 MB pickle) cost 2.3 s per
hit. Everything derived and small (table rows, labels, figures) uses `st.cache_data`.
Everything that came from a log is shown as text (st.text / st.code / dataframes), never as
markdown or HTML.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import streamlit as st

from logscope import present
from logscope.analyze import analyze_run
from logscope.atomic import write_atomic
from logscope.cli.dashboard import (
    ENV_ALLOW_DIRS,
    ENV_EXPOSED,
    ENV_MAX_UPLOAD_MB,
    ENV_TOKEN,
    ENV_UPLOAD_QUOTA_MB,
)
from logscope.model import SEVERITY_RANK, Finding, Run
from logscope.report import Report
from logscope.store import Store, default_root

# Material icons ship with Streamlit (emoji need a system font a headless server may lack).
SEVERITY_ICON = {
    "critical": ":red[:material/dangerous:]",
    "error": ":red[:material/error:]",
    "warning": ":orange[:material/warning:]",
    "info": ":blue[:material/info:]",
    None: ":green[:material/check_circle:]",
}
UPLOADS = "uploads"


def store_root() -> str:
    """The store folder: LOGSCOPE_STORE (the CLI sets it), else the default cache folder."""
    return str(default_root())


def get_store() -> Store:
    return Store(store_root())


@st.cache_data(show_spinner=False, max_entries=64)
def run_ids(root: str, version: float) -> list[str]:
    """Ids of the runs in the store (`version` is the runs folder's mtime, so new runs show;
    not `_version`: st.cache_data leaves underscore arguments out of the key)."""
    return Store(root).run_ids()


def list_run_ids() -> list[str]:
    store = get_store()
    try:
        version = store.runs_dir.stat().st_mtime
    except OSError:
        version = 0.0
    return run_ids(str(store.root), version)


@st.cache_resource(show_spinner=False, max_entries=16)
def load_run(root: str, run_id: str) -> Run | None:
    """A stored run (shared; pages must not modify it)."""
    report = load_report(root, run_id)
    return report.run if report is not None else None


@st.cache_resource(show_spinner="Analysing…", max_entries=16)
def load_report(root: str, run_id: str) -> Report | None:
    """The Report of a stored run (the same pipeline the CLI runs; never recomputed here)."""
    run = Store(root).get_run(run_id)
    return analyze_run(run) if run is not None else None


#: session_state key of the one smoothing weight every chart page uses
SMOOTHING = "smoothing"


def smoothing_setting() -> float:
    """The smoothing weight (debiased EMA, 0 = raw) shared by every page: one sidebar slider
    whose value lives in st.session_state["smoothing"] (0 by default), so a value set on one
    page holds on the others (a widget's own key is dropped when a page without it runs)."""
    ss = st.session_state
    value = float(ss.get(SMOOTHING, 0.0))
    ss[SMOOTHING] = value
    ss["_smoothing_slider"] = value  # always: the widget is a new one on each page
    st.sidebar.slider(
        "Smoothing (debiased EMA weight, every page)",
        0.0,
        0.99,
        step=0.01,
        key="_smoothing_slider",
        on_change=_smoothing_picked,
        help="0 draws the raw values; the smoothed curve is drawn over a faint raw one.",
    )
    return float(ss[SMOOTHING])


def _smoothing_picked() -> None:
    st.session_state[SMOOTHING] = st.session_state["_smoothing_slider"]


@st.cache_data(show_spinner=False, max_entries=256)
def run_row(root: str, run_id: str) -> dict[str, Any] | None:
    """One row of the Runs table."""
    report = load_report(root, run_id)
    if report is None:
        return None
    run = report.run
    steps = run.steps
    _, walls = run.wall_times()
    return {
        "name": run_label(run),
        "source": f"{run.source.kind}: {run.source.path}",
        "steps": len(steps),
        "last step": int(steps[-1]) if len(steps) else None,
        "worst severity": report.worst_severity or "none",
        "findings": len(report.findings),
        "last step time": fmt_time(float(walls.max())) if len(walls) else "",
        "id": run.id,
    }


def fmt_time(wall: float) -> str:
    """Epoch seconds as UTC time; small numbers (seconds since start) as a duration."""
    if wall > 1e9:
        return datetime.fromtimestamp(wall, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"{wall:,.0f} s"


def run_label(run: Run) -> str:
    path = run.source.path or ""
    name = Path(path).name if path and not path.startswith("<") else ""
    if name and Path(path).parent.name == UPLOADS:
        name = _upload_names(str(Path(path).parent)).get(name, name)
    return str(name or run.meta.get("experiment") or run.id[:12])


def _upload_names(folder: str) -> dict[str, str]:
    try:
        return json.loads((Path(folder) / "names.json").read_text())
    except (OSError, ValueError):
        return {}


@st.cache_data(show_spinner=False, max_entries=256)
def label_of(root: str, run_id: str) -> str:
    run = load_run(root, run_id)
    return f"{run_label(run)} · {run_id[:8]}" if run is not None else run_id


def page_setup() -> None:
    """Call first on every page.

    Streamlit starts in its legacy pages/-folder mode and leaves it only when app.py calls
    st.navigation; if the first visit to a fresh server is a deep link (e.g. /metrics), that
    page runs without app.py and shows the folder's file names as navigation. Leaving the mode
    here makes every later run go through app.py. (No st.rerun: it would drop the widget
    event of the current run.)
    """
    try:
        from streamlit.runtime.pages_manager import PagesManager
    except ImportError:  # pragma: no cover - a Streamlit without this internal
        return
    if getattr(PagesManager, "uses_pages_directory", False):
        PagesManager.uses_pages_directory = False
    if not authorized():  # a page opened directly (the legacy mode above) is gated here too
        token_gate()
        st.stop()


# ---- sharing: the access token ----------------------------------------------------------
def exposed() -> bool:
    """Shared mode (`logscope dashboard --host` off loopback, or `--exposed`)."""
    return os.environ.get(ENV_EXPOSED, "").lower() not in ("", "0", "false", "no")


def token_ok(given: object) -> bool:
    """Whether `given` is the access token (constant-time); never without a token set."""
    token = os.environ.get(ENV_TOKEN, "")
    if not token or not isinstance(given, str):
        return False
    return hmac.compare_digest(given.encode(), token.encode())


def authorized() -> bool:
    """Whether this browser session may see the app. Always on loopback without a token;
    otherwise once the session gave the token (`?token=` in the URL once, or the form), which
    is then kept in its session_state and checked again on every run. A shared dashboard
    without a token configured lets nobody in."""
    if not exposed() and not os.environ.get(ENV_TOKEN):
        return True
    ss = st.session_state
    if token_ok(ss.get("_access_token")):
        return True
    given = st.query_params.get("token")
    if given is not None:
        del st.query_params["token"]  # out of the address bar, history and copied links
        if token_ok(given):
            ss["_access_token"] = given
            return True
        ss["_token_wrong"] = True
    return False


def token_gate() -> None:
    """All a session without the token sees: no run, no path, nothing from the store."""
    st.title("Token required")
    if not os.environ.get(ENV_TOKEN):
        st.error("This shared dashboard has no access token set, so it shows nothing.")
        return
    ss = st.session_state
    if ss.pop("_token_wrong", False):
        st.error("That token is not the one of this dashboard.")
    st.info(
        "This dashboard is shared, so it needs its access token. Open the link "
        "`logscope dashboard` printed at start (…/?token=…), or paste the token here."
    )
    with st.form("token_form"):
        given = st.text_input("Access token", type="password")
        if st.form_submit_button("Open"):
            if token_ok(given):
                ss["_access_token"] = given
                st.rerun()
            st.error("That token is not the one of this dashboard.")


# ---- sharing: typed paths and uploads ---------------------------------------------------
class Refused(ValueError):
    """A typed path or an upload this dashboard will not take (the message says why)."""


def allowed_dirs() -> list[Path]:
    """The `--allow-dir` folders, resolved."""
    raw = os.environ.get(ENV_ALLOW_DIRS, "")
    return [Path(d).resolve() for d in raw.split(os.pathsep) if d]


def _inside(path: Path, dirs: list[Path]) -> bool:
    return any(path == d or path.is_relative_to(d) for d in dirs)


def check_path(text: str) -> str:
    """The path to read for what was typed. Unconfined (loopback, no --allow-dir): as typed.
    Confined: no URI, no `..`, relative to the first allowed folder, resolved with symlinks
    followed and inside an allowed folder (a folder's own links too); else Refused."""
    text = text.strip()
    if not exposed() and not os.environ.get(ENV_ALLOW_DIRS):
        return text
    dirs = allowed_dirs()
    where = ", ".join(map(str, dirs))
    if not dirs:
        raise Refused("This dashboard reads no typed paths (no --allow-dir); upload a log.")
    if "://" in text:
        raise Refused(f"Only files under {where} can be read here, not URIs.")
    p = Path(text)
    if ".." in p.parts:
        raise Refused(f"Refused: paths with '..' are not accepted here (allowed: {where}).")
    real = (p if p.is_absolute() else dirs[0] / p).resolve()  # symlinks followed
    if not _inside(real, dirs):
        raise Refused(f"Refused: {text} is outside the folders this dashboard reads ({where}).")
    if real.is_dir():
        for dirpath, dirnames, filenames in os.walk(real, followlinks=False):
            for name in (*dirnames, *filenames):
                child = Path(dirpath) / name
                if child.is_symlink() and not _inside(child.resolve(), dirs):
                    rel = child.relative_to(real)
                    raise Refused(
                        f"Refused: {text} holds a link out of the folders this dashboard "
                        f"reads ({rel}); give a file or a folder without such links."
                    )
    return str(real)


def _mb(name: str) -> float | None:
    try:
        return float(os.environ[name])
    except (KeyError, ValueError):
        return None


def uploads_size(folder: Path) -> int:
    """Bytes of the uploaded files kept in the store (names.json aside)."""
    try:
        return sum(f.stat().st_size for f in folder.iterdir() if f.name != "names.json")
    except OSError:
        return 0


def _size(n: float) -> str:
    return f"{n / 1e6:,.1f} MB" if n >= 100_000 else f"{n:,.0f} bytes"


def check_upload(name: str, size: int, folder: Path) -> None:
    """Refused when an upload is larger than --max-upload-mb or would exceed the quota."""
    limit = _mb(ENV_MAX_UPLOAD_MB)
    if limit is not None and size > limit * 1e6:
        raise Refused(f"{name} is {_size(size)}; this dashboard takes up to {limit:g} MB.")
    quota = _mb(ENV_UPLOAD_QUOTA_MB)
    used = uploads_size(folder)
    if quota is not None and used + size > quota * 1e6:
        raise Refused(
            f"{name} ({_size(size)}) would exceed the uploads quota of {quota:g} MB "
            f"({_size(used)} used); ask whoever started the dashboard to free room."
        )


# ---- selection --------------------------------------------------------------------------
def _preselected(ids: list[str]) -> list[str]:
    wanted = [r for r in os.environ.get("LOGSCOPE_RUNS", "").split(",") if r]
    return [r for r in wanted if r in ids]


def selected_runs(ids: list[str]) -> list[str]:
    """The runs picked for Compare (session `selected_runs`, else LOGSCOPE_RUNS, else the first
    two)."""
    ss = st.session_state
    chosen = [r for r in ss.get("selected_runs", []) if r in ids]
    if not chosen:
        chosen = _preselected(ids) or ids[:2]
    return chosen


def select_run(ids: list[str]) -> str | None:
    """Sidebar selector for the current run, kept in session_state['run_id']."""
    if not ids:
        return None
    ss = st.session_state
    query = st.query_params.get("run")
    if query in ids and ss.get("_run_from_query") != query:
        ss["run_id"] = query
        ss["_run_from_query"] = query
    if ss.get("run_id") not in ids:
        pre = _preselected(ids)
        ss["run_id"] = pre[0] if pre else ids[0]
    # The widget's own key follows run_id (which tests, links and other pages may set); a
    # user's pick goes the other way through the callback, which runs before the script.
    if ss.get("_run_select") != ss["run_id"]:
        ss["_run_select"] = ss["run_id"]
    root = store_root()
    st.sidebar.selectbox(
        "Run",
        ids,
        key="_run_select",
        format_func=lambda rid: label_of(root, rid),
        on_change=_picked_run,
    )
    return ss["run_id"]


def _picked_run() -> None:
    st.session_state["run_id"] = st.session_state["_run_select"]


def run_page(title: str) -> tuple[str, Report] | None:
    """Start a page about the current run: set up, title, and the run's id and Report (None:
    the page says why there is none)."""
    page_setup()
    st.title(title)
    return require_run()


def require_run() -> tuple[str, Report] | None:
    """The current run's id and Report, or an explanation on the page when there is none."""
    ids = list_run_ids()
    if not ids:
        st.info(
            "The store is empty. Add a run on the Runs page, or start the dashboard with "
            "`logscope dashboard LOG...`."
        )
        return None
    run_id = select_run(ids)
    report = load_report(store_root(), run_id) if run_id else None
    if report is None:
        st.error(f"Run {run_id} could not be read from the store.")
        return None
    return run_id, report


# ---- adding runs ------------------------------------------------------------------------
def save_upload(name: str, data: bytes) -> Path:
    """Save uploaded bytes into <store>/uploads/<hash><suffix> (never over a user's file);
    Refused past --max-upload-mb or the uploads quota (an upload already kept costs nothing)."""
    digest = hashlib.blake2b(data, digest_size=12).hexdigest()
    suffix = "".join(Path(name).suffixes[-2:]) or ".log"
    target = get_store().root / UPLOADS / f"{digest}{suffix}"
    if not target.exists():
        check_upload(Path(name).name, len(data), target.parent)
        write_atomic(target, data)
        names = _upload_names(str(target.parent))
        names[target.name] = Path(name).name
        write_atomic(target.parent / "names.json", json.dumps(names))
    return target


def ingest(path: str | Path) -> list[Run]:
    """Read `path` into the store (cached by content hash) and clear the run list cache."""
    runs = get_store().load(path)
    run_ids.clear()
    return runs


# ---- findings ---------------------------------------------------------------------------
def worst_first(findings: list[Finding]) -> list[Finding]:
    """Findings by severity (worst first), then step (run-level first)."""
    return sorted(findings, key=lambda f: (-SEVERITY_RANK[f.severity], f.step or -1))


def overrides(findings: list[Finding]) -> list[str]:
    """Every distinct override of these findings, in order."""
    return list(dict.fromkeys(o for f in findings for o in present.overrides(f.advice)))
