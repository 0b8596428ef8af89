"""`logscope mcp` driven by the official SDK's client over stdio: every tool's result equals the
CLI's `--format json` (or `verdict`) output for the same input; errors are the CLI's messages;
paths outside the allowed folders are refused."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from logscope.cli import app

pytest.importorskip("mcp")
import anyio
from anyio.from_thread import start_blocking_portal
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

ROOT = Path(__file__).resolve().parent.parent
TUNED = ROOT / "fixtures" / "verl_tuned.log"
BASELINE = ROOT / "fixtures" / "verl_baseline.log"
EXCERPT = ROOT / "fixtures" / "excerpts" / "verl_0.9_grpo_oom.log"
SCRIPT = ROOT / "fixtures" / "check" / "run_ppo_baseline.sh"
REAL_LOGS = ROOT.parent / "shared" / "real_logs"
REAL = REAL_LOGS / "03_verl03_plain-step59-kl-entropy-pg-grad-nan.log"
CALL_TIMEOUT = 120  # seconds for one tool call (a first analysis imports the detectors)

pytestmark = pytest.mark.timeout(600)
runner = CliRunner()


class Client:
    """A `logscope mcp` subprocess and an initialised SDK session, called synchronously."""

    def __init__(self, portal: Any, session: ClientSession) -> None:
        self.portal = portal
        self.session = session

    def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        async def go() -> Any:
            with anyio.fail_after(CALL_TIMEOUT):
                return await self.session.call_tool(name, arguments)

        return self.portal.call(go).model_dump(by_alias=True)

    def tools(self) -> list[dict[str, Any]]:
        async def go() -> Any:
            with anyio.fail_after(CALL_TIMEOUT):
                return await self.session.list_tools()

        return [t.model_dump(by_alias=True) for t in self.portal.call(go).tools]


@asynccontextmanager
async def _session(args: list[str], cwd: Path) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "logscope", "mcp", *args],
        cwd=str(cwd),
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        with anyio.fail_after(CALL_TIMEOUT):
            await session.initialize()
        yield session


@pytest.fixture(scope="module")
def allowed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A scratch folder the server may read (tail state files, links)."""
    return tmp_path_factory.mktemp("allowed")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("store")


@pytest.fixture(scope="module")
def client(allowed: Path, store: Path) -> Iterator[Client]:
    dirs = [ROOT, allowed] + ([REAL_LOGS] if REAL_LOGS.is_dir() else [])
    args = [a for d in dirs for a in ("--allow-dir", str(d))] + ["--store", str(store)]
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(_session(args, ROOT)) as session,
    ):
        yield Client(portal, session)


def cli(*args: str, store: Path | None = None) -> tuple[int, str, str]:
    """`logscope ARGS [--store STORE]` in process: exit code, stdout, stderr."""
    result = runner.invoke(app, [*args, *(["--store", str(store)] if store else [])])
    return result.exit_code, result.stdout, result.stderr


def cli_json(*args: str, store: Path | None = None) -> tuple[int, Any]:
    code, out, err = cli(*args, store=store)
    assert code in (0, 1), err
    return code, json.loads(out)


def ok(result: dict[str, Any]) -> dict[str, Any]:
    """The structured content of a successful call (its JSON text says the same)."""
    assert not result["isError"], result["content"]
    data = result["structuredContent"]
    assert json.loads(result["content"][0]["text"]) == data
    return data


def exit_code(result: dict[str, Any]) -> int:
    """The exit code the CLI would give: in `_meta` (mcp 2) and in the last text block."""
    match = re.match(r"exit_code (\d):", result["content"][-1]["text"])
    assert match, result["content"][-1]
    if result.get("_meta"):
        assert result["_meta"]["logscope/exit_code"] == int(match.group(1))
    return int(match.group(1))


def error(result: dict[str, Any]) -> str:
    assert result["isError"], result
    text = result["content"][0]["text"]
    assert "Traceback" not in text
    return text


def cli_message(stderr: str) -> str:
    """The CLI's error message without its `logscope:` prefix and the terminal's line wraps."""
    return " ".join(stderr.replace("logscope:", "", 1).split())


# ---- the tool list ----------------------------------------------------------------------------
def test_lists_the_tools_with_schemas(client: Client) -> None:
    tools = {t["name"]: t for t in client.tools()}
    expected = {"analyze", "explain", "check", "compare", "tail_status"}
    if (ROOT / "logscope" / "cli" / "query.py").exists() and "query" in tools:
        expected.add("query")
    assert set(tools) == expected
    for tool in tools.values():
        assert len(tool["description"]) > 80
        assert tool["inputSchema"]["type"] == "object"
        assert tool["outputSchema"]["type"] == "object"
        assert tool["annotations"]["readOnlyHint"] is True
    assert tools["analyze"]["inputSchema"]["required"] == ["paths"]
    assert "verdict" in tools["analyze"]["inputSchema"]["properties"]


# ---- analyze ----------------------------------------------------------------------------------
def test_analyze_equals_the_cli_json(client: Client, store: Path) -> None:
    code, expected = cli_json("analyze", str(TUNED), "--format", "json", store=store)
    result = client.call("analyze", {"paths": [str(TUNED)]})
    assert ok(result) == expected
    assert exit_code(result) == code


def test_analyze_relative_path_equals_the_cli_run_in_the_same_folder(
    client: Client, store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)  # the server's working directory
    _, expected = cli_json("analyze", "fixtures/verl_tuned.log", "-f", "json", store=store)
    data = ok(client.call("analyze", {"paths": ["fixtures/verl_tuned.log"]}))
    assert data == expected
    assert data["run"]["source"]["path"] == "fixtures/verl_tuned.log"


def test_analyze_verdict_equals_the_cli_verdict(client: Client, store: Path) -> None:
    _, expected = cli_json("analyze", str(TUNED), "--format", "verdict", store=store)
    result = client.call("analyze", {"paths": [str(TUNED)], "verdict": True})
    assert ok(result) == expected
    assert expected["schema"] == "logscope.verdict/1"
    assert len(result["content"][0]["text"].encode()) <= 4096


def test_analyze_options_and_exit_code_equal_the_cli(client: Client, store: Path) -> None:
    args = ["--only", "LS202,seed-unset", "--fail-on", "info"]
    code, expected = cli_json("analyze", str(TUNED), "-f", "json", *args, store=store)
    result = client.call(
        "analyze", {"paths": [str(TUNED)], "only": ["LS202", "seed-unset"], "fail_on": "info"}
    )
    assert ok(result) == expected
    assert {f["name"] for f in expected["findings"]} <= {"reward-plateau", "seed-unset"}
    assert code == 1 and exit_code(result) == 1
    skipped = ok(client.call("analyze", {"paths": [str(TUNED)], "skip": ["LS202"]}))
    assert "reward-plateau" not in {f["name"] for f in skipped["findings"]}


def test_analyze_many_runs_equals_the_cli_fleet(client: Client, store: Path) -> None:
    paths = [str(BASELINE), str(TUNED)]
    _, expected = cli_json("analyze", *paths, "-f", "json", store=store)
    assert ok(client.call("analyze", {"paths": paths})) == expected
    assert expected["schema"] == "logscope.fleet/1"
    _, verdicts = cli_json("analyze", *paths, "-f", "verdict", store=store)
    assert ok(client.call("analyze", {"paths": paths, "verdict": True})) == verdicts
    assert verdicts["schema"] == "logscope.fleet-verdict/1"


def test_analyze_a_glob_equals_the_cli(client: Client, store: Path) -> None:
    pattern = str(ROOT / "fixtures" / "excerpts" / "verl_0.9*.log")
    _, expected = cli_json("analyze", pattern, "-f", "json", store=store)
    assert ok(client.call("analyze", {"paths": [pattern]})) == expected


def test_rotated_logs_are_joined_as_the_cli_joins_them(
    client: Client, store: Path, allowed: Path
) -> None:
    from logscope.synthetic import simulate, write_console_log

    folder = allowed / "rotated"
    folder.mkdir()
    full = write_console_log(simulate(120, "grpo", seed=5), allowed / "full.log")
    lines = full.read_text().splitlines(keepends=True)
    first_step = next(i for i, line in enumerate(lines) if "step:" in line and " - " in line)
    middle = first_step + (len(lines) - first_step) // 2
    (folder / "verl.log.1").write_text("".join(lines[:middle]))
    (folder / "verl.log").write_text("".join(lines[middle:]))
    full.unlink()
    for extra, arguments in (([], {}), (["--no-stitch"], {"no_stitch": True})):
        _, expected = cli_json("analyze", str(folder), "-f", "json", *extra, store=store)
        assert ok(client.call("analyze", {"paths": [str(folder)], **arguments})) == expected
        assert expected["schema"] == ("logscope.fleet/1" if extra else "logscope.report/1")


@pytest.mark.skipif(not REAL.is_file(), reason="../shared/real_logs is not beside the checkout")
def test_analyze_a_real_excerpt_equals_the_cli(client: Client, store: Path) -> None:
    _, expected = cli_json("analyze", str(REAL), "-f", "json", store=store)
    assert ok(client.call("analyze", {"paths": [str(REAL)]})) == expected
    _, verdict = cli_json("analyze", str(REAL), "-f", "verdict", store=store)
    assert ok(client.call("analyze", {"paths": [str(REAL)], "verdict": True})) == verdict
    assert verdict["status"] == "broken"  # NaN losses: an error finding


@pytest.mark.skipif(not REAL.is_file(), reason="../shared/real_logs is not beside the checkout")
def test_a_folder_of_real_logs_in_a_process_pool_equals_the_cli(
    client: Client, store: Path
) -> None:
    """23 files: `analyze_inputs` uses its process pool inside the server too."""
    _, expected = cli_json("analyze", str(REAL_LOGS), "-f", "verdict", store=store)
    result = client.call("analyze", {"paths": [str(REAL_LOGS)], "verdict": True})
    assert ok(result) == expected
    assert expected["runs"] == len(list(REAL_LOGS.glob("*.log")))
    assert len(result["content"][0]["text"].encode()) <= 4096


# ---- explain, check, compare ------------------------------------------------------------------
def test_explain_a_key_and_a_run_equal_the_cli(client: Client, store: Path) -> None:
    _, expected = cli_json("explain", "actor/ppo_kl", "-f", "json", store=store)
    assert ok(client.call("explain", {"target": "actor/ppo_kl"})) == expected
    _, expected = cli_json("explain", str(EXCERPT), "-f", "json", store=store)
    assert ok(client.call("explain", {"target": str(EXCERPT)})) == expected
    assert expected["kind"] == "runs"


def test_explain_an_unknown_key_is_the_cli_error(client: Client, store: Path) -> None:
    code, _, err = cli("explain", "actor/ppo_kll", store=store)
    assert code == 2
    assert error(client.call("explain", {"target": "actor/ppo_kll"})) == cli_message(err)


def test_check_a_script_and_its_fix_equal_the_cli(client: Client, store: Path) -> None:
    code, expected = cli_json("check", str(SCRIPT), "-f", "json")
    result = client.call("check", {"path": str(SCRIPT), "fix": True})
    data = ok(result)
    assert data == (expected if isinstance(expected, dict) else {"reports": expected})
    fixed = runner.invoke(app, ["check", str(SCRIPT), "--fix"]).stdout
    assert result["content"][1]["text"].rstrip("\n") == fixed.rstrip("\n")
    assert exit_code(result) == code


def test_check_a_command_equals_the_cli(client: Client) -> None:
    command = [
        "python3",
        "-m",
        "verl.trainer.main_ppo",
        "data.train_batch_size=100",
        "actor_rollout_ref.actor.ppo_mini_batch_size=64",
    ]
    result = runner.invoke(app, ["check", "-f", "json", "--", *command])
    expected = json.loads(result.stdout)
    assert ok(client.call("check", {"command": command})) == expected
    assert ok(client.call("check", {"command": " ".join(command)}))["findings"]


def test_check_needs_one_input(client: Client) -> None:
    assert "exactly one of" in error(client.call("check", {}))


def test_compare_equals_the_cli(client: Client, store: Path) -> None:
    _, expected = cli_json("compare", str(BASELINE), str(TUNED), "-f", "json", store=store)
    assert ok(client.call("compare", {"runs": [str(BASELINE), str(TUNED)]})) == expected
    assert expected["schema"] == "logscope.compare/1"


# ---- tail_status ------------------------------------------------------------------------------
def test_tail_status_reads_a_tail_state_file(client: Client, allowed: Path) -> None:
    from logscope.tail import TailOptions, TailSession

    log = allowed / "live.log"
    shutil.copy(TUNED, log)
    state = allowed / "tail.json"
    session = TailSession(log, TailOptions(from_start=True, min_severity="info"), None, state)
    session.cycle()
    session.close()
    data = ok(client.call("tail_status", {"state_file": str(state)}))
    assert data["schema"] == "logscope.tail-status/1"
    assert [a["name"] for a in data["alerts"]] == [a.name for a in session.alerted]
    assert data["alerts_count"] == len(session.alerted) > 0
    assert all(a["code"].startswith("LS") for a in data["alerts"])
    assert data["log"]["last_step"] == 210 and data["log"]["steps"] == 210
    assert data["stalled"] is False
    quick = ok(client.call("tail_status", {"state_file": str(state), "read_log": False}))
    assert quick["log"]["last_step"] is None and quick["alerts"] == data["alerts"]


def test_tail_status_of_something_else_is_an_error(client: Client, allowed: Path) -> None:
    other = allowed / "not-state.json"
    other.write_text("[1, 2]")
    assert "not a logscope tail state file" in error(
        client.call("tail_status", {"state_file": str(other)})
    )


# ---- errors and confinement -------------------------------------------------------------------
def test_a_missing_file_is_the_cli_error(client: Client, store: Path) -> None:
    missing = ROOT / "fixtures" / "no-such-run.log"
    code, _, err = cli("analyze", str(missing), store=store)
    assert code == 2
    assert error(client.call("analyze", {"paths": [str(missing)]})) == cli_message(err)


def test_paths_outside_the_allowed_folders_are_refused(
    client: Client, allowed: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    outside = tmp_path_factory.mktemp("outside")
    secret = outside / "run.log"
    shutil.copy(TUNED, secret)
    for name, args in [
        ("analyze", {"paths": [str(secret)]}),
        ("analyze", {"paths": [str(outside / "*.log")]}),
        ("explain", {"target": str(secret)}),
        ("check", {"path": str(secret)}),
        ("compare", {"runs": [str(TUNED), str(secret)]}),
        ("tail_status", {"state_file": str(outside / "tail.json")}),
        ("analyze", {"paths": [str(ROOT / "fixtures" / ".." / "..")]}),
    ]:
        assert "outside the folders this server reads" in error(client.call(name, args)), name
    link = allowed / "link.log"
    if not link.exists():
        link.symlink_to(secret)
    assert "outside the folders" in error(client.call("analyze", {"paths": [str(link)]}))
    folder = allowed / "runs"
    folder.mkdir(exist_ok=True)
    if not (folder / "out").exists():
        (folder / "out").symlink_to(outside)
    assert "holds a link out" in error(client.call("analyze", {"paths": [str(folder)]}))
    assert "not URIs" in error(client.call("analyze", {"paths": ["wandb://e/p/abc"]}))


def test_a_script_cannot_make_check_read_a_yaml_outside(
    client: Client, allowed: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    outside = tmp_path_factory.mktemp("configs")
    (outside / "cfg.yaml").write_text("data:\n  train_batch_size: 64\n")
    script = allowed / "launch.sh"
    script.write_text(
        f"python3 -m verl.trainer.main_ppo --config-path {outside} --config-name cfg "
        "actor_rollout_ref.actor.ppo_mini_batch_size=16\n"
    )
    assert "outside the folders" in error(client.call("check", {"path": str(script)}))
    inside = allowed / "configs"
    inside.mkdir(exist_ok=True)
    (inside / "cfg.yaml").write_text("data:\n  train_batch_size: 64\n")
    script.write_text(script.read_text().replace(str(outside), str(inside)))
    _, expected = cli_json("check", str(script), "-f", "json")
    assert ok(client.call("check", {"path": str(script)})) == expected


def test_bad_arguments_are_tool_errors(client: Client) -> None:
    assert re.search(r"paths.*array", error(client.call("analyze", {"paths": "x.log"})))
    assert "required" in error(client.call("analyze", {}))
    assert "additional" in error(client.call("explain", {"target": "x", "bogus": 1})).lower()
    assert "unknown tool" in error(client.call("nope", {}))


def test_a_missing_allowed_folder_is_refused_before_serving(tmp_path: Path) -> None:
    result = runner.invoke(app, ["mcp", "--allow-dir", str(tmp_path / "nope")])
    assert result.exit_code == 2
    assert "not a folder" in cli_message(result.stderr)


# ---- query (when `logscope query` and DuckDB are there) ---------------------------------------
def _has_query() -> bool:
    import importlib.util

    return all(importlib.util.find_spec(m) for m in ("duckdb", "logscope.cli.query"))


@pytest.mark.skipif(not _has_query(), reason="logscope query or duckdb is not installed")
def test_query_equals_the_cli_and_is_read_only(client: Client, store: Path) -> None:
    ok(client.call("analyze", {"paths": [str(TUNED)]}))  # the store holds a run
    sql = "SELECT name, severity, count(*) AS n FROM findings GROUP BY ALL ORDER BY ALL"
    _, expected = cli_json("query", sql, "-f", "json", store=store)
    assert ok(client.call("query", {"sql": sql})) == expected
    assert expected["rows"]
    few = ok(client.call("query", {"sql": "SELECT * FROM metrics", "max_rows": 3}))
    assert len(few["rows"]) == 3 and few["truncated"] and few["total_rows"] > 3
    assert "only SELECT-like" in error(
        client.call("query", {"sql": f"COPY (SELECT 1) TO '{store}/x.csv'"})
    )
    assert "disabled" in error(
        client.call("query", {"sql": "SELECT * FROM read_text('/etc/passwd')"})
    )
    assert not (store / "x.csv").exists()


def test_without_the_sdk_the_command_says_which_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mcp", None)  # `import mcp` raises ImportError
    result = runner.invoke(app, ["mcp"])
    assert result.exit_code == 2
    assert "pip install 'logscope[mcp]'" in cli_message(result.stderr)
