"""Detectors of a long run run in threads: the same findings, skips and errors, in the same
order, as one after the other."""

from __future__ import annotations

import logscope.analyze as analyze
from logscope.detector import Detector
from logscope.ingest import load
from logscope.settings import for_input
from logscope.synthetic import Injection, simulate, write_console_log


class _Broken(Detector, code="LS999", name="always-fails"):
    """Raises: a bug in a detector is an error line, in its place among the others."""

    title = "fails"

    def detect(self, run):
        raise RuntimeError("boom")


def test_threaded_detectors_give_what_one_after_the_other_gives(tmp_path, monkeypatch) -> None:
    log = tmp_path / "run.log"
    inject = [Injection("kl-jump", 900), Injection("nan-loss", 1400)]
    write_console_log(simulate(1600, "ppo", seed=4, inject=inject), log, ansi=False)
    (run,) = load(log)
    detectors = [*for_input(log).detectors(None, None), _Broken()]

    monkeypatch.setattr(analyze, "THREADED_ROWS", 10**12)
    assert analyze.detector_threads(run) == 1
    alone = analyze.run_detectors(run, detectors)
    monkeypatch.setattr(analyze, "THREADED_ROWS", 0)
    monkeypatch.setattr(analyze, "DETECTOR_THREADS", 4)
    assert analyze.detector_threads(run) > 1 or analyze._cores() == 1
    (again,) = load(log)  # a fresh run: its caches are filled by the threads themselves
    threaded = analyze.run_detectors(again, detectors)

    findings, skipped, errors = threaded
    assert [f.to_dict() for f in findings] == [f.to_dict() for f in alone[0]]
    assert {f.name for f in findings} >= {"kl-jump", "non-finite-metric"}
    assert skipped == alone[1] and skipped
    assert errors == alone[2] == ["LS999 always-fails failed: RuntimeError: boom"]
