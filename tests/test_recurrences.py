"""Recurrences: a spike that happens again after a quiet stretch is a finding of its own.

`_changes.recurring` numbers the occurrences of a metric's spikes (LS101 kl-jump, LS120
clip-ratio-spike, LS130 grad-norm-spike); a recurrence says "again" and carries its occurrence
and the first occurrence's step, so incidents keep it apart and `tail` alerts it. Slack is a
real HTTP server on 127.0.0.1.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from logscope.detectors._changes import Recurrence, ordinal, recurring
from logscope.detectors.kl import KLJump
from logscope.detectors.policy import ClipRatioSpike, GradNormSpike

from logscope.alerts import Notifier, Outbox, SlackSender
from logscope.analyze import analyze_run
from logscope.ingest import load
from logscope.synthetic import simulate, write_console_log
from logscope.tail import TailOptions, TailSession
from tests.helpers import make_run
from tests.slack_server import SlackStandIn

CONFIG = {
    "actor_rollout_ref": {
        "actor": {"optim": {"lr": 1e-6}, "grad_clip": 1.0, "clip_ratio": 0.2, "entropy_coeff": 0}
    },
    "data": {"max_response_length": 1024},
}

# ---- the occurrence rule ----------------------------------------------------------------------


def test_occurrences_are_separated_by_a_quiet_stretch():
    # 30 is 17 quiet steps after 12 (same occurrence); 100 is 69 after 30; 151 is exactly 50
    # quiet steps after 100 (a new one); 160 is 8 after 151
    spans = [(10, 12), (30, 30), (100, 100), (151, 151), (160, 160)]
    got = dict(recurring(spans, 50, 10))
    assert [got[i].occurrence for i in range(5)] == [1, 1, 2, 3, 3]
    assert [got[i].starts for i in range(5)] == [True, False, True, True, False]
    assert {r.first_step for r in got.values()} == {10}
    assert {r.count for r in got.values()} == {3}
    assert got[2].again(100) == "again at step 100 (2nd time; first at 10)"
    assert got[1].again(30) is None and got[0].again(10) is None
    assert got[2].evidence() == {"occurrence": 2, "first_step": 10}
    # a quiet stretch of 49 steps is still the same occurrence
    assert [r.occurrence for _, r in recurring([(1, 1), (51, 51)], 50, 10)] == [1, 1]


def test_the_limit_keeps_every_recurrence_before_more_of_a_burst():
    spans = [(10, 12), (30, 30), (100, 100), (151, 151), (160, 160)]
    kept = recurring(spans, 50, 3)
    assert [i for i, _ in kept] == [0, 2, 3]
    # by rank within an occurrence; with one occurrence the rank alone decides (old behaviour)
    one = recurring([(10, 10), (20, 20), (30, 30)], 50, 2, rank=[3.0, 1.0, 2.0])
    assert [i for i, _ in one] == [1, 2]
    assert all(r.evidence() == {} for _, r in one)
    # the earliest kept span of an occurrence starts it
    assert [r.starts for _, r in one] == [True, False]
    assert recurring([], 50, 3) == []


def test_a_lone_spike_reads_as_before():
    rec = Recurrence(occurrence=1, first_step=5, starts=True, count=1)
    assert rec.evidence() == {} and rec.again(5) is None


@pytest.mark.parametrize(
    ("n", "text"), [(1, "1st"), (2, "2nd"), (3, "3rd"), (4, "4th"), (11, "11th"), (12, "12th"),
                    (13, "13th"), (21, "21st"), (22, "22nd"), (101, "101st"), (111, "111th")],
)  # fmt: skip
def test_ordinal(n, text):
    assert ordinal(n) == text


# ---- the detectors ----------------------------------------------------------------------------


def _grad_norm(spikes: dict[int, float], n: int = 400, seed: int = 7) -> np.ndarray:
    rng = np.random.default_rng(seed)
    gn = 0.5 * np.exp(rng.normal(0, 0.15, n))
    for i, k in spikes.items():
        gn[i] *= k
    return gn


def test_grad_norm_recurrence_says_again_with_its_occurrence():
    gn = _grad_norm({60: 8, 80: 7, 300: 9})  # a burst at steps 61 and 81, again at 301
    found = GradNormSpike().detect(make_run({"actor/grad_norm": gn}, config=CONFIG))
    assert [f.step for f in found] == [61, 81, 301]
    assert [f.evidence["occurrence"] for f in found] == [1, 1, 2]
    assert {f.evidence["first_step"] for f in found} == {61}
    assert "again" not in found[0].message and "again" not in found[1].message
    assert "spiked again at step 301 (2nd time; first at 61): from " in found[2].message
    assert found[2].message.count("at step 301") == 1


def test_grad_norm_recurrences_are_kept_before_more_of_a_burst():
    burst = {60 + 8 * k: 8 for k in range(5)}  # 5 spikes 8 steps apart: one occurrence
    gn = _grad_norm({**burst, 250: 12, 350: 12}, n=450)
    found = GradNormSpike(max_spikes=5).detect(make_run({"actor/grad_norm": gn}, config=CONFIG))
    assert len(found) == 5
    assert [f.step for f in found][-2:] == [251, 351]  # not cut by the burst
    assert [f.evidence["occurrence"] for f in found] == [1, 1, 1, 2, 3]


def test_a_single_spike_has_no_occurrence_evidence():
    gn = _grad_norm({60: 8, 80: 7})
    found = GradNormSpike().detect(make_run({"actor/grad_norm": gn}, config=CONFIG))
    assert len(found) == 2
    assert all("occurrence" not in f.evidence and "again" not in f.message for f in found)


def test_min_gap_steps_is_a_declared_parameter():
    gn = _grad_norm({60: 8, 80: 7})
    found = GradNormSpike(min_gap_steps=10).detect(make_run({"actor/grad_norm": gn}, config=CONFIG))
    assert [f.evidence["occurrence"] for f in found] == [1, 2]
    assert "again at step 81 (2nd time; first at 61)" in found[1].message
    for cls in (ClipRatioSpike, GradNormSpike, KLJump):
        assert cls().params()["min_gap_steps"] == 50


def test_pg_clipfrac_recurrence():
    rng = np.random.default_rng(3)
    cf = 0.004 * np.exp(rng.normal(0, 0.1, 400))
    cf[100] = cf[320] = 0.12
    found = ClipRatioSpike().detect(make_run({"actor/pg_clipfrac": cf}, config=CONFIG))
    assert [f.step for f in found] == [101, 321]
    assert [f.evidence["occurrence"] for f in found] == [1, 2]
    assert "spiked again at step 321 (2nd time; first at 101): from" in found[1].message


def test_kl_spike_recurrence():
    rng = np.random.default_rng(0)
    kl = 0.015 * np.exp(rng.normal(0, 0.05, 400))
    kl[120] *= 12
    kl[330] *= 12
    found = KLJump().detect(make_run({"actor/kl_loss": kl}))
    assert [f.step for f in found] == [121, 331]
    assert [f.evidence["occurrence"] for f in found] == [1, 2]
    assert [f.evidence["first_step"] for f in found] == [121, 121]
    assert "spiked again at step 331 (2nd time; first at 121): from" in found[1].message
    assert "again" not in found[0].message


# ---- a simulated run: two findings, two incidents, two alerts ---------------------------------

SPIKES = (100, 300)  # two truncation spikes 200 steps apart


@pytest.fixture(scope="module")
def two_spikes_log(tmp_path_factory) -> Path:
    """A healthy simulated GRPO run with two clip-ratio spikes added at SPIKES (the injection
    adds 1–2 more at random, so the spikes are added as `_clip_ratio_spike` adds its own)."""
    sim = simulate(400, "grpo", seed=11, version="0.5")
    m = sim.metrics
    hit = pl.col("step").is_in(list(SPIKES))
    sim.metrics = m.with_columns(
        pl.when(hit & (pl.col("metric") == "response_length/clip_ratio"))
        .then(pl.col("value") + 0.15)
        .otherwise(pl.col("value"))
        .alias("value")
    )
    path = tmp_path_factory.mktemp("recur") / "two_spikes.log"
    write_console_log(sim, path, version="0.5")
    return path


def _clip_findings(report):
    return [f for f in report.findings if f.name == "clip-ratio-spike"]


def test_two_spikes_200_steps_apart_are_two_findings(two_spikes_log: Path):
    (run,) = load(two_spikes_log)
    report = analyze_run(run)
    found = _clip_findings(report)
    assert [f.step for f in found] == list(SPIKES)
    assert [f.evidence["occurrence"] for f in found] == [1, 2]
    assert "spiked again at step 300 (2nd time; first at 100)" in found[1].message
    incidents = [i for i in report.incidents if i.first_mover == "clip-ratio-spike"]
    assert sorted(i.step for i in incidents) == list(SPIKES)


def _chunks(path: Path, n: int) -> list[bytes]:
    lines = path.read_bytes().splitlines(keepends=True)
    size = max(1, len(lines) // n)
    return [b"".join(lines[i : i + size]) for i in range(0, len(lines), size)]


def test_tail_alerts_each_occurrence_through_slack(two_spikes_log: Path, tmp_path: Path):
    target = tmp_path / "live.log"
    with SlackStandIn() as slack:
        notifier = Notifier(
            Outbox(tmp_path / "box"), SlackSender(slack.url), min_interval_s=0, retry_after_s=0
        )
        session = TailSession(target, TailOptions(from_start=True), notifier)
        for chunk in _chunks(two_spikes_log, 40):
            with target.open("ab") as fh:
                fh.write(chunk)
            session.cycle()
        session.cycle()
        for _ in range(20):
            if not notifier.outbox.pending():
                break
            notifier.flush()
            time.sleep(0.05)
        assert notifier.outbox.pending() == []
        clip = [b for b in slack.received if "Clip ratio spiked" in b["text"]]
        assert len(clip) == 2, [b["text"] for b in slack.received]
        assert "step 100" in clip[0]["text"] and "step 300" in clip[1]["text"]
        assert "again" in clip[1]["text"]
        assert not any(b["text"].startswith("Update") for b in clip)
