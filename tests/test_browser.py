"""A real browser on a real server: `logscope dashboard LOGS --port P`, headless Chromium.

Uses the system chromium through Playwright (no browser download). Checks what a person sees:
each page draws its charts (counted), a finding's panel is a readable curve (not a flat line),
a finding card's advice text is not clipped at 1400 px, and a card's "Show on chart" link opens
Metrics zoomed on the finding's window. Saves one screenshot per page to artifacts/
(gitignored); the README's screenshots (docs/img/) come from scripts/screenshot_dashboard.py.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "artifacts"
WIDTH, HEIGHT = 1400, 1100
WAIT_MS = 240_000  # a loaded machine renders slowly; every wait is bounded, none is timed

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

#: a finding card (app/_cards.finding_card keys its container `card-N`) and its text blocks
CARDS = '[class*="st-key-card-"]'
CARD_PARTS = f'{CARDS}, {CARDS} [data-testid="stMarkdownContainer"]'
#: a plotly div's title, x-range and how much of its y-range its curves cover (1: all of it)
CHART_JS = """div => {
    const fl = div._fullLayout;
    // plotly's computed points (the figure's own arrays may still be base64 specs)
    const ys = (div.calcdata || []).filter(cd => cd[0] && cd[0].trace.mode !== 'markers')
        .flatMap(cd => cd.map(pt => pt.y)).filter(Number.isFinite);
    const yr = fl.yaxis.range.map(Number);
    const lin = fl.yaxis.type === 'log' ? ys.filter(v => v > 0).map(Math.log10) : ys;
    const spread = lin.length ? Math.max(...lin) - Math.min(...lin) : 0;
    return {
        title: ((fl.title && fl.title.text) || '').replace(/<[^>]*>/g, ''),
        xrange: fl.xaxis.range.map(Number),
        cover: spread / Math.abs(yr[1] - yr[0] || 1),
    };
}"""


@dataclass
class Expected:
    """What the pages must show, from the same analysis the dashboard runs."""

    title: str  # a finding title the Run page shows
    override: str  # one of its overrides
    short_ids: list[str]  # the runs' labels carry the first 8 chars of their ids
    first: int  # the current run's step range
    last: int
    metrics_panels: int  # panels the Metrics page draws at first
    flagged: list[str]  # metrics with findings (each has its panel)
    zoom: tuple[str, int]  # (metric, step) of a finding whose zoom is narrower than the run
    overlays: int  # overlay charts of the Compare page


def _expected(store: Path) -> Expected:
    from logscope.app._plots import ALWAYS_OPEN, OPEN_GROUPS

    from logscope.analyze import analyze_run
    from logscope.charts import panel_groups, zoom_range
    from logscope.compare import KEY_METRICS
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
    steps = first.run.steps
    lo, hi = int(steps[0]), int(steps[-1])
    groups = panel_groups(first.run.metric_names, first.findings)
    panels = sum(
        len(g.default) for i, g in enumerate(groups) if i < OPEN_GROUPS or g.key in ALWAYS_OPEN
    )

    def width(f):  # type: ignore[no-untyped-def]
        a, b = zoom_range(lo, hi, f.step, f.end_step)
        return b - a

    linked = [f for f in first.findings if f.metric and f.step is not None]
    narrow = min(linked, key=width)
    assert width(narrow) < hi - lo, "no finding of the sample run has a window to zoom on"
    runs = [r.run for r in reports[:2]]
    overlays = len({n for km in KEY_METRICS for r in runs if (n := km.find(r))})
    return Expected(
        finding.title,
        override,
        [r.run.id[:8] for r in reports],
        lo,
        hi,
        panels,
        sorted({f.metric for f in linked}),
        (str(narrow.metric), int(narrow.step)),  # type: ignore[arg-type]
        overlays,
    )


def _charts(page) -> list[dict]:  # type: ignore[no-untyped-def]
    return page.eval_on_selector_all(shot.PLOT, f"els => els.map({CHART_JS})")


def _assert_cards_unclipped(page, where: str) -> int:  # type: ignore[no-untyped-def]
    """Every finding card and every text block in it fits its box and the viewport width."""
    parts = page.eval_on_selector_all(
        CARD_PARTS,
        """els => els.map(el => { const r = el.getBoundingClientRect();
            return {sw: el.scrollWidth, cw: el.clientWidth, left: r.left, right: r.right,
                    text: el.innerText.slice(0, 60)}; })""",
    )
    assert parts, f"{where}: no finding card"
    width = page.viewport_size["width"]
    for p in parts:
        assert p["sw"] <= p["cw"] + 1, (where, "clipped", p)
        assert p["left"] >= 0 and p["right"] <= width + 0.5, (where, "outside the viewport", p)
    return page.locator(CARDS).count()


@pytest.mark.timeout(900)
def test_dashboard_in_chromium(tmp_path: Path) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    store = tmp_path / "store"
    paths = shot.input_paths(store)  # the fixtures, or a seeded store until they are readable
    env = {shot.ENV_LIVE: str(shot.LIVE_LOG)}
    with shot.serve(paths, store, env=env) as url:
        want = _expected(store)
        with shot.browser_page(WIDTH, HEIGHT) as page:
            # Runs and Fleet: the tables of the store's runs.
            shot.open_page(page, url, "", charts=False)
            assert page.locator('[data-testid="stMain"] h1').first.inner_text() == "Runs"
            page.locator('[data-testid="stDataFrame"]').first.wait_for(timeout=WAIT_MS)
            _shoot(page, "runs")
            shot.open_page(page, url, "fleet", charts=False)
            page.locator('[data-testid="stDataFrame"]').first.wait_for(timeout=WAIT_MS)
            assert "worst runs first" in page.locator('[data-testid="stMain"]').inner_text()
            _shoot(page, "fleet")

            # Run page: a finding title and its override, the timeline, unclipped cards.
            shot.open_page(page, url, "run")
            page.get_by_text(want.title, exact=True).first.wait_for(timeout=WAIT_MS)
            page.get_by_text(want.override).first.wait_for(timeout=WAIT_MS)
            titles = [c["title"] for c in _charts(page)]
            assert any(t.startswith("Findings on the step axis") for t in titles), titles
            n_cards = _assert_cards_unclipped(page, "run")
            assert n_cards >= 2
            _shoot(page, "run")

            # A card's "Show on chart" link opens Metrics zoomed on the finding's window.
            metric, step = want.zoom
            links = page.eval_on_selector_all(
                f'{CARDS} a[href*="metric="]', "els => els.map(e => e.href)"
            )
            hrefs = [
                h
                for h in links
                if (_query(h).get("metric"), _query(h).get("step")) == (metric, str(step))
            ]
            assert hrefs, (metric, links)
            link = page.locator(f'{CARDS} a[href*="metric="]').nth(links.index(hrefs[0]))
            assert f"Show on chart: {metric} · step {step}" in link.inner_text(), link.inner_text()
            link.click()
            page.get_by_text("Focus: ").first.wait_for(state="visible", timeout=WAIT_MS)
            page.wait_for_url("**/metrics?**", timeout=WAIT_MS)
            shot.wait_idle(page)
            shot.wait_charts(page)
            focus = page.eval_on_selector(f".st-key-focus {shot.PLOT}", CHART_JS)
            assert focus["title"].startswith(f"{metric} · steps"), focus
            lo, hi = focus["xrange"]
            assert hi - lo < want.last - want.first, (focus, want.first, want.last)
            assert lo <= step <= hi, (focus, step)
            _shoot(page, "focus")

            # Metrics page: one chart per panel of the open groups, each finding's curve
            # readable (it spans a good part of its own y-axis, not a flat line at 0).
            shot.open_page(page, url, "metrics")
            charts = _charts(page)
            assert len(charts) >= want.metrics_panels, (len(charts), want.metrics_panels)
            by_title = {c["title"]: c for c in charts}
            for name in want.flagged:
                assert name in by_title, (name, sorted(by_title))
                assert by_title[name]["cover"] > 0.3, (name, by_title[name])
            _shoot(page, "metrics")

            # Config page: its finding cards, unclipped.
            shot.open_page(page, url, "config", charts=False)
            page.get_by_text("Config checks").first.wait_for(timeout=WAIT_MS)
            _assert_cards_unclipped(page, "config")
            _shoot(page, "config")

            # Compare page: both runs, an overlay per key metric, with both runs' curves.
            shot.open_page(page, url, "compare")
            text = page.locator('[data-testid="stMain"]').inner_text()
            for short in want.short_ids[:2]:
                assert short in text, short
            assert "Key metrics" in text and "Config diff" in text
            assert page.locator(shot.PLOT).count() >= want.overlays >= 2
            legend = page.eval_on_selector_all(
                f"{shot.CHART} .legendtext", "els => els.map(e => e.textContent)"
            )
            assert len(set(legend)) >= 2, legend
            _shoot(page, "compare")

            # Live page: follows LOGSCOPE_LIVE's log, draws its curves and findings.
            shot.open_page(page, url, "live")
            assert page.locator(shot.PLOT).count() >= 1
            assert "last step" in page.locator('[data-testid="stMain"]').inner_text()
            _shoot(page, "live")
    assert (ARTIFACTS / "browser_compare.png").stat().st_size > 10_000


def _shoot(page, name: str) -> None:  # type: ignore[no-untyped-def]
    charts, cap = shot.PAGES.get(name, (True, 1400))
    shot.shoot(page, ARTIFACTS / f"browser_{name}.png", cap, charts)


def _query(href: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(href).query).items()}


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
            want = _expected(store)
            title, short_ids = want.title, want.short_ids
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
