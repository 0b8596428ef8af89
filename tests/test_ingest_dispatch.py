"""`logscope.ingest.load` picks the right reader from what a path is (sniffing order)."""

from __future__ import annotations

import json

import pytest

from logscope.exceptions import IngestError, UnknownSource
from logscope.ingest import READER_MODULES, kinds, load, reader_modules

try:
    from _ingest_writers import write_tensorboard, write_verl_jsonl
except ImportError:  # tests/ imported as a package
    from tests._ingest_writers import write_tensorboard, write_verl_jsonl

ROWS = [(s, {"actor/pg_loss": 0.1 * s, "critic/score/mean": 0.5}) for s in range(1, 6)]


def test_every_reader_module_follows_the_contract():
    modules = reader_modules()
    assert [m.__name__.rsplit(".", 1)[1] for m in modules] == list(READER_MODULES)
    for module in modules:
        assert isinstance(module.KIND, str) and module.KIND
        assert isinstance(module.DESCRIPTION, str) and module.DESCRIPTION
        assert callable(module.sniff) and callable(module.read)
    assert len(kinds()) == len(modules)  # kinds are unique
    assert READER_MODULES[-1] == "console"  # the catch-all for text logs comes last


def test_structured_formats_are_recognised(tmp_path):
    pytest.importorskip("tensorboard")
    verl_jsonl = write_verl_jsonl(tmp_path / "p" / "e.jsonl", ROWS)
    generic_jsonl = tmp_path / "history.jsonl"
    generic_jsonl.write_text("\n".join(json.dumps({"_step": s, **m}) for s, m in ROWS))
    csv = tmp_path / "metrics.csv"
    csv.write_text("step,loss\n1,0.5\n2,0.4\n")
    wandb_export = tmp_path / "wandb_export.csv"
    wandb_export.write_text(
        '"Step","run-a - actor/pg_loss","run-a - actor/pg_loss__MIN","run-a - actor/pg_loss__MAX"\n'
        '"1","0.1","0.1","0.1"\n'
    )
    tb = tmp_path / "tensorboard_log"
    write_tensorboard(tb / "p" / "e", ROWS)
    expected = {
        verl_jsonl: "verl-jsonl",
        generic_jsonl: "table",
        csv: "table",
        wandb_export: "wandb-csv",
        tb: "tensorboard",
        next((tb / "p" / "e").glob("events.out.tfevents.*")): "tensorboard",
    }
    for path, kind in expected.items():
        runs = load(path)
        assert runs and {r.source.kind for r in runs} == {kind}, path


def test_source_override_is_honoured(tmp_path):
    path = write_verl_jsonl(tmp_path / "e.jsonl", ROWS)
    (run,) = load(path, source="verl-jsonl")
    assert run.source.kind == "verl-jsonl"
    # forced to the generic table reader, the nested {"data": {...}} holds no top-level metric
    with pytest.raises(IngestError, match="no numeric metric"):
        load(path, source="table")


def test_unknown_and_missing_paths(tmp_path):
    other = tmp_path / "notes.bin"
    other.write_bytes(b"\x00\x01binary stuff")
    with pytest.raises(UnknownSource) as err:
        load(other)
    message = str(err.value)
    assert str(other) in message and "tensorboard" in message and "wandb-offline" in message
    with pytest.raises(IngestError, match="no such file"):
        load(tmp_path / "missing.log")
    with pytest.raises(UnknownSource, match="unknown --source"):
        load(other, source="nope")


def test_wandb_uri_goes_to_the_online_reader():
    from logscope.ingest import wandb_online

    assert wandb_online.sniff("wandb://team/proj/abc123")
    assert wandb_online.sniff("https://wandb.ai/team/proj/runs/abc123")


def test_a_mixed_folder_reads_every_run_in_it_and_says_what_it_passed_over(tmp_path):
    pytest.importorskip("tensorboard")
    folder = tmp_path / "runs"
    write_tensorboard(folder / "tb" / "exp", ROWS)
    write_verl_jsonl(folder / "grpo.jsonl", ROWS)
    (folder / "train.log").write_text("step:1 - actor/pg_loss:0.100 - critic/score/mean:0.500\n")
    (folder / "README.md").write_text("# notes\n")
    (folder / "config.yaml").write_text("data:\n  train_batch_size: 8\n")
    runs = load(folder)
    assert sorted(r.source.kind for r in runs) == ["tensorboard", "verl-console", "verl-jsonl"]
    note = next(n for n in runs[0].parse_stats.notes if n.startswith("read from folder"))
    assert "3 run(s)" in note and "README.md" in note and "config.yaml" in note


def test_the_folder_above_wandb_is_read_like_wandb_itself(tmp_path):
    from pathlib import Path

    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "wandb_sdk" / "wandb-0.22.3.wandb"
    run_folder = tmp_path / "project" / "wandb" / "offline-run-20260101_000000-abc123"
    run_folder.mkdir(parents=True)
    (run_folder / "run-abc123.wandb").write_bytes(fixture.read_bytes())
    direct = load(tmp_path / "project" / "wandb")
    above = load(tmp_path / "project")
    assert [r.source.kind for r in above] == ["wandb-offline"]
    assert above[0].id == direct[0].id and above[0].metrics.equals(direct[0].metrics)


def test_a_folder_with_no_run_names_what_it_passed_over(tmp_path):
    (tmp_path / "notes.md").write_text("# nothing here\n")
    with pytest.raises(IngestError, match=r"no verl log.*notes\.md"):
        load(tmp_path)


def test_the_source_option_names_every_reader() -> None:
    from logscope.cli.common import SourceOption

    help_text = SourceOption.__metadata__[0].help
    assert all(kind in help_text for kind in kinds()), help_text


def test_a_sniffed_reader_is_used_while_the_file_is_unchanged(tmp_path, monkeypatch):
    from logscope.ingest import Sniffed, console, jsonl

    log = tmp_path / "train.log"
    log.write_text("step:1 - actor/pg_loss:0.100 - critic/score/mean:0.500\n")
    sniffed: list[str] = []
    for module in reader_modules():
        monkeypatch.setattr(
            module, "sniff", lambda p, m=module, f=module.sniff: sniffed.append(m.KIND) or f(p)
        )
    hint = Sniffed.of(log, console.KIND)
    (run,) = load(log, reader=hint)
    assert sniffed == [] and run.has_metric("actor/pg_loss")
    # the file changed since (now JSONL): the hint no longer holds, every reader is asked
    log.unlink()
    write_verl_jsonl(log, ROWS)
    assert not hint.holds_for(log)
    (run,) = load(log, reader=hint)
    assert run.source.kind == jsonl.KIND and jsonl.KIND in sniffed
