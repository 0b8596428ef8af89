"""The report lists the metric keys logscope does not know, in every format and from the cache."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from logscope.analyze import analyze_paths
from logscope.cli.main import app

LOG = "".join(
    f"step:{i} - actor/pg_loss:{0.1 + i / 100} - actor/entropy:0.5 - myfork/bonus:{i} - "
    f"myfork/tool_calls:{i % 3}\n"
    for i in range(1, 13)
)


def test_unknown_keys_are_listed_and_known_ones_are_not(tmp_path):
    log = tmp_path / "run.log"
    log.write_text(LOG)
    (report,) = analyze_paths([log], use_cache=False)
    assert report.unknown_metrics == ["myfork/bonus", "myfork/tool_calls"]
    assert report.to_dict()["unknown_metrics"] == ["myfork/bonus", "myfork/tool_calls"]
    markdown = report.to_markdown()
    assert "## Metrics logscope does not know" in markdown
    assert "not understood: 2 metric keys \\(myfork/bonus, myfork/tool\\_calls\\)" in markdown
    assert "not understood: 2 metric keys" in report.to_html()


def test_the_cached_report_keeps_them(tmp_path):
    log = tmp_path / "run.log"
    log.write_text(LOG)
    store = tmp_path / "store"
    first = analyze_paths([log], store_dir=store)[0].unknown_metrics
    again = analyze_paths([log], store_dir=store)[0].unknown_metrics
    assert first == again == ["myfork/bonus", "myfork/tool_calls"]


def test_cli_shows_the_count_and_names(tmp_path):
    log = tmp_path / "run.log"
    log.write_text(LOG)
    result = CliRunner().invoke(app, ["analyze", str(log), "--no-cache"])
    assert result.exit_code == 0, result.output
    assert "not understood: 2 metric keys (myfork/bonus, myfork/tool_calls)" in " ".join(
        result.output.split()
    )
    data = json.loads(
        CliRunner().invoke(app, ["analyze", str(log), "--no-cache", "-f", "json"]).stdout
    )
    assert data["unknown_metrics"] == ["myfork/bonus", "myfork/tool_calls"]
