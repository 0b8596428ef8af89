"""A real browser on a real server: `logscope dashboard LOGS --port P`, headless Chromium.

Uses the system chromium through Playwright (no browser download). Saves screenshots to
artifacts/ (gitignored) as test artifacts.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "artifacts"

if not Path("/usr/bin/chromium").exists():
    pytest.skip(
        "/usr/bin/chromium is missing (apt-get install -y chromium; .ci/run does this)",
        allow_module_level=True,
    )
pytest.importorskip("playwright", reason="playwright (python package) is not installed")
pytest.importorskip("streamlit")

_spec = importlib.util.spec_from_file_location(
    "screenshot_dashboard", ROOT / "scripts" / "screenshot_dashboard.py"
)
shot = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(shot)  # type: ignore[union-attr]


def _expected(store: Path) -> tuple[str, str, list[str], bool]:
    """A finding title and an override the Run page must show, and the run labels."""
    from logscope.analyze import analyze_run
    from logscope.store import Store

    st = Store(store)
    ids = st.run_ids()
    reports = [analyze_run(st.get_run(i)) for i in ids]  # type: ignore[arg-type]
    # The app opens the first preselected run (the baseline fixture) or the first id.
    first = next((r for r in reports if "baseline" in r.run.source.path), reports[0])
    incident = first.incidents[0]
    finding = first.findings[incident.findings[0]]
    override = next(
        a.override for k in incident.findings[:3] for a in first.findings[k].advice if a.override
    )
    linked = any(f.metric and f.step is not None for f in first.findings)
    return finding.title, override, [r.run.id[:8] for r in reports], linked


@pytest.mark.timeout(900)  # a loaded machine renders slowly; the waits are bounded, not timed
def test_dashboard_in_chromium(tmp_path: Path) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    store = tmp_path / "store"
    paths = shot.input_paths(store)  # the fixtures, or a seeded store until they are readable
    with shot.serve(paths, store) as url:
        title, override, short_ids, linked = _expected(store)
        with shot.browser_page(1400, 1100) as page:
            # Run page: a finding title and its override are visible.
            shot.open_page(page, url, "run")
            page.get_by_text(title, exact=True).first.wait_for(state="visible", timeout=180_000)
            page.get_by_text(override).first.wait_for(state="visible", timeout=180_000)
            page.screenshot(path=str(ARTIFACTS / "browser_run.png"), full_page=True)
            # A finding's link opens the Metrics page zoomed on its metric at its step.
            if linked:
                page.get_by_text("Chart of ").first.click()
                page.get_by_text("Focus: ").first.wait_for(state="visible", timeout=180_000)
                page.wait_for_selector(shot.CHART, timeout=180_000)

            # Metrics page: the plotly charts render (svg drawn), with finding markers.
            shot.open_page(page, url, "metrics")
            assert page.locator(shot.CHART).count() >= 3
            page.screenshot(path=str(ARTIFACTS / "browser_metrics.png"))

            # Compare page: both runs are shown (labels carry the first 8 chars of the id).
            shot.open_page(page, url, "compare")
            main = page.locator('[data-testid="stMain"]')
            text = main.inner_text()
            for short in short_ids[:2]:
                assert short in text, short
            assert "Key metrics" in text and "Config diff" in text
            legend = page.eval_on_selector_all(
                f"{shot.CHART} .legendtext", "els => els.map(e => e.textContent)"
            )
            assert len(set(legend)) >= 2, legend
            page.screenshot(path=str(ARTIFACTS / "browser_compare.png"), full_page=True)
    assert (ARTIFACTS / "browser_compare.png").stat().st_size > 10_000


TOKEN = "browser-test-token-4kV9pQ2"


@pytest.mark.timeout(900)
def test_shared_dashboard_needs_the_token_in_chromium(tmp_path: Path) -> None:
    """Shared mode forced on (--exposed) on 127.0.0.1: no run data without the token, the run
    with ?token=. The first visit is a deep link, so the page-level gate is exercised too."""
    import os
    import signal
    import subprocess
    import sys
    import time

    store = tmp_path / "store"
    paths = shot.input_paths(store)
    allowed = tmp_path / "runs"
    allowed.mkdir()
    port = shot.free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-c", "from logscope.cli import main; main()", "dashboard",
           *map(str, paths), "--store", str(store), "--port", str(port),
           "--exposed", "--allow-dir", str(allowed)]  # fmt: skip
    env = {**os.environ, "LOGSCOPE_DASHBOARD_TOKEN": TOKEN}
    log_path = tmp_path / "dashboard.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        try:
            deadline = time.monotonic() + 120
            while not shot._healthy(url):
                assert proc.poll() is None, log_path.read_text(errors="replace")[-3000:]
                assert time.monotonic() < deadline, f"not healthy at {url}"
                time.sleep(0.5)
            title, _, short_ids, _ = _expected(store)
            with shot.browser_page(1400, 1100) as page:
                for where in ("run", "", "compare"):
                    page.goto(f"{url}/{where}", wait_until="domcontentloaded", timeout=240_000)
                    page.get_by_text("Token required").first.wait_for(timeout=240_000)
                    page.wait_for_function(
                        "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')",
                        timeout=240_000,
                    )
                    text = page.locator("body").inner_text()
                    assert title not in text and str(store) not in text
                    assert not any(short in text for short in short_ids), where
                    assert not any(p.name in text for p in paths), where
                    assert page.locator(shot.CHART).count() == 0
                page.screenshot(path=str(ARTIFACTS / "browser_token_required.png"))
                # With the token: the run, and the token gone from the address bar.
                page.goto(f"{url}/run?token={TOKEN}", wait_until="domcontentloaded")
                page.get_by_text(title, exact=True).first.wait_for(state="visible", timeout=240_000)
                body = page.locator("body").inner_text()
                assert not paths or any(p.name in body for p in paths)
                page.wait_for_function("() => !location.search.includes('token')", timeout=60_000)
        finally:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=15)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                os.killpg(proc.pid, signal.SIGKILL)
    assert TOKEN not in log_path.read_text(errors="replace")  # a given token is never printed
