"""Real excerpts users pasted into public threads (../shared/real_logs, beside the checkout):
every file is analysed, every label of EXPECT.tsv is reported, nothing else at warning or above.

The files are not copied into the project; without the folder these tests are skipped.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from logscope.analyze import analyze_paths

REAL_LOGS = Path(__file__).resolve().parents[2] / "shared" / "real_logs"

# EXPECT.tsv's labels (INDEX.md's vocabulary) → the diagnoses that say the same thing.
LABEL_NAMES: dict[str, set[str]] = {
    "cuda-oom": {"cuda-oom"},
    "host-oom-worker-killed": {"host-oom-worker-killed"},
    "ray-worker-registration-failed": {"ray-worker-registration-failed"},
    "ray-actor-died": {"ray-actor-died"},
    "nccl-error": {"nccl-error"},
    "vllm-error": {
        "vllm-error",
        "vllm-kv-cache-no-memory",
        "vllm-model-inspection-failed",
        "max-num-batched-tokens-too-small",
    },
    "batch-size-divisibility-error": {"batch-size-divisibility-error"},
    "hydra-config-error": {"hydra-config-error"},
    "run-crashed": {"run-crashed"},
    "non-finite-metric": {"non-finite-metric"},
    "grad-norm-spike": {"grad-norm-spike"},
    "entropy-collapse": {"entropy-collapse"},
    "entropy-blowup": {"entropy-blowup"},
    "kl-jump": {"kl-jump", "kl-out-of-band"},
    "response-length-clipped": {"response-length-clipped"},
    "response-length-collapse": {"response-length-collapse"},
    "advantage-collapse": {"advantage-collapse"},
    "reward-plateau": {"reward-plateau"},
    "rollout-bottleneck": {"rollout-bottleneck"},
    "memory-leak": {"memory-leak"},
    "throughput-drop": {"throughput-drop"},
}


def _expectations() -> list[tuple[str, set[str]]]:
    if not (REAL_LOGS / "EXPECT.tsv").is_file():
        return []
    with open(REAL_LOGS / "EXPECT.tsv", newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh, delimiter="\t"))
    return [(r[0], {x for x in (r[1] if len(r) > 1 else "").split(",") if x}) for r in rows if r]


EXPECT = _expectations()
pytestmark = pytest.mark.skipif(
    not EXPECT, reason=f"{REAL_LOGS} is absent (CI has ../shared beside the checkout)"
)


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, dict]:
    """Every excerpt analysed once, as the JSON report a user gets."""
    store = tmp_path_factory.mktemp("store")
    paths = [REAL_LOGS / name for name, _ in EXPECT]
    found = analyze_paths(paths, store_dir=store, use_cache=False)
    return {Path(r.run.source.path).name: json.loads(r.to_json()) for r in found}


def test_every_label_of_the_vocabulary_is_mapped():
    labels = {label for _, wanted in EXPECT for label in wanted}
    assert labels <= set(LABEL_NAMES), labels - set(LABEL_NAMES)


def test_every_excerpt_is_read(reports):
    assert sorted(reports) == sorted(name for name, _ in EXPECT)
    for name, report in reports.items():
        assert report["errors"] == [], (name, report["errors"])


@pytest.mark.parametrize(("name", "labels"), EXPECT, ids=[n[:24] for n, _ in EXPECT])
def test_labels_reported_and_nothing_else(reports, name, labels):
    findings = reports[name]["findings"]
    names = {f["name"] for f in findings}
    missing = [label for label in sorted(labels) if not names & LABEL_NAMES[label]]
    assert not missing, f"{name}: not reported {missing}; got {sorted(names)}"
    allowed = set().union(*(LABEL_NAMES[label] for label in labels)) if labels else set()
    extra = sorted(
        f"{f['name']} ({f['severity']})"
        for f in findings
        if f["severity"] != "info" and f["name"] not in allowed
    )
    assert not extra, f"{name}: unexpected warning-or-higher findings {extra}"


@pytest.mark.parametrize("name", [n for n, _ in EXPECT], ids=[n[:24] for n, _ in EXPECT])
def test_both_console_paths_read_it_the_same(tmp_path, name):
    from tests.test_console_reader import read_both

    read_both(tmp_path, (REAL_LOGS / name).read_bytes(), name)


def _docker(line: bytes) -> bytes:
    """The line as Docker's json-file driver stores it."""
    record = {
        "log": line.decode("utf-8", "replace"),
        "stream": "stdout",
        "time": "2025-01-01T00:00:00Z",
    }
    return json.dumps(record).encode() + b"\n"


COPIES = {
    "spaces": lambda line: b"    " + line,  # a Markdown or reST code block
    "tab": lambda line: b"\t" + line,
    "docker": _docker,
    # Python logging's prefix, and a copy from a web page that turned blanks into no-break spaces
    "logging": lambda line: b"2025-07-01 12:00:00,123 INFO " + line,
    "nbsp": lambda line: line.replace(b" - ", "\u00a0-\u00a0".encode()),
    "journal": lambda line: b"Dec 03 12:00:00 gpu-node-1 python[12345]: " + line,  # journalctl
    "compose": lambda line: b"verl-trainer-1  | " + line,  # docker compose logs
}


@pytest.mark.parametrize("copy", sorted(COPIES))
@pytest.mark.parametrize("name", [n for n, _ in EXPECT], ids=[n[:24] for n, _ in EXPECT])
def test_a_copy_reads_the_same_metrics(tmp_path, name, copy):
    """Every line indented, or wrapped in a log collector's record: records and their wrapped or
    one-item-per-line rest are read as from the plain excerpt."""
    from tests.test_console_reader import read_both

    text = (REAL_LOGS / name).read_bytes()
    copied = b"".join(COPIES[copy](line) for line in text.splitlines(keepends=True))
    plain, other = read_both(tmp_path, text, name), read_both(tmp_path, copied, "copy_" + name)
    assert other.steps.tolist() == plain.steps.tolist()
    assert other.metrics.sort(["metric", "step"]).equals(plain.metrics.sort(["metric", "step"]))
    assert [e.kind for e in other.events] == [e.kind for e in plain.events]


def _hard_wrapped(text: str, width: int) -> str:
    """`text` as a terminal of `width` columns shows it, copied with a newline at each wrap."""
    rows = (
        line[i : i + width] for line in text.splitlines() for i in range(0, len(line) or 1, width)
    )
    return "\n".join(rows) + "\n"


@pytest.fixture(scope="module")
def wrapped_reports(tmp_path_factory) -> dict[str, dict]:
    """Every excerpt hard-wrapped at 100 columns (tmux, screen, a narrow terminal), analysed."""
    folder = tmp_path_factory.mktemp("wrapped")
    paths = []
    for name, _ in EXPECT:
        text = (REAL_LOGS / name).read_text(encoding="utf-8", errors="replace")
        (folder / name).write_text(_hard_wrapped(text, 100), encoding="utf-8")
        paths.append(folder / name)
    found = analyze_paths(paths, store_dir=folder / "store", use_cache=False)
    return {Path(r.run.source.path).name: json.loads(r.to_json()) for r in found}


@pytest.mark.parametrize("name", [n for n, _ in EXPECT], ids=[n[:24] for n, _ in EXPECT])
def test_hard_wrapped_at_100_columns_the_same_diagnoses(reports, wrapped_reports, name):
    """Lines cut at a fixed width (in tracebacks, Ray-prefixed ones too, and step lines) are
    joined again: the warning-or-higher diagnoses are those of the excerpt as pasted."""

    def warned(report: dict) -> list[str]:
        return sorted({f["name"] for f in report["findings"] if f["severity"] != "info"})

    assert warned(wrapped_reports[name]) == warned(reports[name])
