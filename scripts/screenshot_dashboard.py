"""Take the README screenshots of the dashboard (docs/img/<page>.png) in a real browser.

Starts `logscope dashboard fixtures/verl_baseline.log fixtures/verl_tuned.log` on a free
127.0.0.1 port with a temporary store (until the fixtures can be read, the store is seeded with
the test runs of tests/dashboard_data.py instead) and LOGSCOPE_LIVE set to the tuned fixture
(the Live page's default log to follow), opens each page in headless system Chromium
through Playwright, waits for its script run to finish and its plotly charts to draw, and saves
one screenshot per page: runs, fleet, run, metrics, config, compare, live. Each is 1400 px wide
and as tall as the page's content, at most the page's cap (PAGES; ≤ 2,500 px).

    python scripts/screenshot_dashboard.py                  # every page into docs/img/
    python scripts/screenshot_dashboard.py --page metrics   # one page
    python scripts/screenshot_dashboard.py --out-dir artifacts

tests/test_browser.py uses the same helpers (serve, browser_page, open_page, wait_charts, shoot).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
#: a drawn plotly chart (its svg exists once plotly has laid it out)
CHART = '[data-testid="stPlotlyChart"] .main-svg'
#: the plotly div of a chart (it carries _fullLayout once drawn)
PLOT = '[data-testid="stPlotlyChart"] .js-plotly-plot'
WIDTH = 1400
#: page → (draws charts, tallest screenshot in px)
PAGES: dict[str, tuple[bool, int]] = {
    "runs": (False, 640),
    "fleet": (False, 700),
    "run": (True, 2500),
    "metrics": (True, 2500),
    "config": (False, 2200),
    "compare": (True, 2500),
    "live": (True, 2500),
}
#: the address of a page ("" is the default page, Runs)
URL_PATH = {"runs": ""}
#: the Live page's default log to follow (app/pages/live.py reads it; read only, like every log)
ENV_LIVE = "LOGSCOPE_LIVE"
LIVE_LOG = ROOT / "fixtures" / "verl_tuned.log"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as resp:
            return resp.status == 200
    except OSError:
        return False


@contextmanager
def serve(
    paths: list[Path],
    store: Path,
    port: int | None = None,
    timeout: float = 120.0,
    env: Mapping[str, str] | None = None,
) -> Iterator[str]:
    """Run `logscope dashboard PATHS --store STORE --port PORT` (with `env` added to this
    process's environment); yield its URL; stop it after."""
    port = port or free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [
        sys.executable,
        "-c",
        "from logscope.cli import main; main()",
        "dashboard",
        *map(str, paths),
        "--store",
        str(store),
        "--port",
        str(port),
    ]
    log_path = store.parent / f"dashboard-{port}.log"
    log = open(log_path, "wb")  # noqa: SIM115
    proc = subprocess.Popen(
        cmd,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env={**os.environ, **(env or {})},
    )
    try:
        deadline = time.monotonic() + timeout
        while not _healthy(url):
            if proc.poll() is not None:
                log.flush()
                text = log_path.read_text(errors="replace")
                raise RuntimeError(f"dashboard exited with {proc.returncode}:\n{text[-3000:]}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"dashboard not healthy at {url} after {timeout:.0f}s")
            time.sleep(0.5)
        _first_visit(url)
        yield url
    finally:
        # Stop the server we started (its own process group: the CLI and streamlit under it).
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=15)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        log.close()


def _first_visit(url: str) -> None:
    """Open the root page once so the server leaves Streamlit's legacy pages-folder mode
    (see logscope.app._common.page_setup) before anyone deep-links to a page."""
    with browser_page() as page:
        page.goto(url, wait_until="domcontentloaded", timeout=90_000)
        page.wait_for_selector('[data-testid="stMain"] h1', timeout=90_000)


@contextmanager
def browser_page(width: int = WIDTH, height: int = 1000) -> Iterator[object]:
    """A Playwright page in headless system Chromium (no browser download)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            yield page
        finally:
            browser.close()


#: true once a script run is over: no status widget ("Running…"), no element still a skeleton
IDLE_JS = """() => !document.querySelector(
    '[data-testid="stStatusWidget"], [data-testid="stSkeleton"], .stSkeleton')"""


def wait_idle(page, timeout_ms: int = 240_000) -> None:  # type: ignore[no-untyped-def]
    """Until the script run is over, and still over a moment later (the status widget shows
    only after a short delay, so one look can fall before it)."""
    for _ in range(2):
        page.wait_for_function(IDLE_JS, timeout=timeout_ms)
        page.wait_for_timeout(400)
    page.wait_for_function(IDLE_JS, timeout=timeout_ms)


def wait_charts(page, timeout_ms: int = 240_000) -> int:  # type: ignore[no-untyped-def]
    """Until every plotly chart on the page is drawn (laid out, its traces in the svg); return
    how many there are."""
    page.wait_for_function(
        """() => {
            const charts = [...document.querySelectorAll('[data-testid="stPlotlyChart"]')];
            return charts.length > 0 && charts.every(c => {
                const div = c.querySelector('.js-plotly-plot');
                return div && div._fullLayout && c.querySelector('.main-svg .trace');
            });
        }""",
        timeout=timeout_ms,
    )
    return int(page.locator(PLOT).count())


def open_page(page, url: str, name: str, charts: bool = True, timeout_ms: int = 240_000) -> None:  # type: ignore[no-untyped-def]
    """Go to a dashboard page (`name` may carry a query) and wait until it has run and drawn
    its charts."""
    page.goto(f"{url}/{name}", wait_until="domcontentloaded", timeout=timeout_ms)
    page.wait_for_selector('[data-testid="stMain"] h1', timeout=timeout_ms)
    if charts:
        page.wait_for_selector(CHART, timeout=timeout_ms)
    wait_idle(page, timeout_ms)
    if charts:
        wait_charts(page, timeout_ms)


def content_height(page) -> int:  # type: ignore[no-untyped-def]
    """Height of the page's content: the main area scrolls, not the document."""
    return int(
        page.evaluate(
            """() => Math.max(
                document.querySelector('[data-testid="stMain"]')?.scrollHeight || 0,
                document.querySelector('[data-testid="stSidebarContent"]')?.scrollHeight || 0)"""
        )
    )


def shoot(page, path: Path, cap: int = 2500, charts: bool = True) -> Path:  # type: ignore[no-untyped-def]
    """Screenshot the page as tall as its content (at most `cap` px): the viewport is resized
    to that height (the main area is what scrolls, not the document), the charts are drawn
    again, and the viewport is put back after."""
    before = dict(page.viewport_size)
    height = max(600, min(cap, content_height(page)))
    page.set_viewport_size({"width": before["width"], "height": height})
    try:
        page.wait_for_timeout(800)  # Streamlit's and plotly's relayout
        wait_idle(page)
        if charts:
            wait_charts(page)
        page.wait_for_timeout(700)  # plotly's transitions
        path.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(path))
    finally:
        page.set_viewport_size(before)
    return path


def input_paths(store: Path) -> list[Path]:
    """The fixtures when the console reader can read them; else seed `store` with test runs."""
    sys.path.insert(0, str(ROOT))
    from tests.dashboard_data import FIXTURES, fixtures_readable, seed_store

    if fixtures_readable():
        return list(FIXTURES)
    seed_store(store, prefer_fixtures=False)
    return []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--page", choices=sorted(PAGES), help="only this page (default: all)")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "docs" / "img")
    parser.add_argument("--width", type=int, default=WIDTH)
    args = parser.parse_args()
    names = [args.page] if args.page else list(PAGES)
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "store"
        paths = input_paths(store)
        with serve(paths, store, env={ENV_LIVE: str(LIVE_LOG)}) as url:
            for name in names:
                charts, cap = PAGES[name]
                # A fresh page each time: every screenshot starts from the same viewport.
                with browser_page(args.width, 1000) as page:
                    open_page(page, url, URL_PATH.get(name, name), charts=charts)
                    out = shoot(page, args.out_dir / f"{name}.png", cap, charts)
                print(out)


if __name__ == "__main__":
    main()
