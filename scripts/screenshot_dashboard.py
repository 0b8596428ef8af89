"""Take the README screenshot of the dashboard (docs/img/dashboard.png) in a real browser.

Starts `logscope dashboard fixtures/verl_baseline.log fixtures/verl_tuned.log` on a free
127.0.0.1 port with a temporary store (until the fixtures can be read, the store is seeded with
the test runs of tests/dashboard_data.py instead), opens a page in headless system Chromium
through Playwright, waits for the plotly charts to draw, and saves a screenshot.

    python scripts/screenshot_dashboard.py [--page metrics] [--out docs/img/dashboard.png]

tests/test_browser.py uses the same helpers (serve, browser_page).
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
from collections.abc import Iterator
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
CHART = '[data-testid="stPlotlyChart"] .main-svg'


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
    paths: list[Path], store: Path, port: int | None = None, timeout: float = 120.0
) -> Iterator[str]:
    """Run `logscope dashboard PATHS --store STORE --port PORT`; yield its URL; stop it after."""
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
    log = open(store.parent / f"dashboard-{port}.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + timeout
        while not _healthy(url):
            if proc.poll() is not None:
                log.flush()
                text = (store.parent / f"dashboard-{port}.log").read_text(errors="replace")
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
def browser_page(width: int = 1400, height: int = 1000) -> Iterator[object]:
    """A Playwright page in headless system Chromium (no browser download)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            yield page
        finally:
            browser.close()


def open_page(page, url: str, name: str, charts: bool = True, timeout_ms: int = 240_000) -> None:  # type: ignore[no-untyped-def]
    """Go to a dashboard page and wait until it has run (and drawn its charts)."""
    page.goto(f"{url}/{name}", wait_until="domcontentloaded", timeout=timeout_ms)
    page.wait_for_selector('[data-testid="stMain"] h1', timeout=timeout_ms)
    if charts:
        page.wait_for_selector(CHART, timeout=timeout_ms)
    # Let the script finish its run (the status widget disappears when it is done).
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=timeout_ms
    )


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
    parser.add_argument("--page", default="metrics")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img" / "dashboard.png")
    parser.add_argument("--width", type=int, default=1400)
    parser.add_argument("--height", type=int, default=1100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "store"
        paths = input_paths(store)
        with serve(paths, store) as url, browser_page(args.width, args.height) as page:
            open_page(page, url, args.page)
            page.wait_for_timeout(1500)  # plotly's transitions
            args.out.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(args.out))
    print(args.out)


if __name__ == "__main__":
    main()
