"""Counts in messages agree with their nouns, and say what is true for 0 and 1."""

from __future__ import annotations

import re

import numpy as np
from logscope.detectors.non_finite import GradNormNotFiniteStepSkipped, NonFiniteMetric
from logscope.detectors.policy import EntropyCollapse

from logscope.words import plural
from tests import _foundation_logs as L
from tests.helpers import make_run

#: a count of 0 or 1 with a plural noun, or the lazy "(s)"
DISAGREES = re.compile(r"\b1 (?:[a-z-]+ )?(?:steps|times|lines|workers|GPUs)\b|\(s\)")


def test_plural_agrees_for_zero_one_many_and_irregular_nouns() -> None:
    assert plural(1, "step") == "1 step"
    assert plural(0, "logged step") == "0 logged steps"
    assert plural(3, "GPU") == "3 GPUs"
    assert plural(1, "mini-batch", "mini-batches") == "1 mini-batch"
    assert plural(2, "mini-batch", "mini-batches") == "2 mini-batches"
    assert plural(2.5, "step") == "2.5 steps"


def test_a_metric_non_finite_on_the_last_step_only_is_one_step_in_a_row() -> None:
    loss = np.r_[np.linspace(0.5, 0.4, 29), np.nan]
    (f,) = NonFiniteMetric().detect(L.make_run({"actor/pg_loss": loss}))
    assert "(1 step in a row)" in f.message
    assert not DISAGREES.search(f.message), f.message


def test_a_single_skipped_step_is_one_warning_line_printed_once() -> None:
    text = L.step_line(4, **{"actor/pg_loss": 0.1}) + "\n"
    text += "(WorkerDict pid=7) WARN: rank 0 grad_norm is not finite: nan\n"
    text += L.step_line(5, **{"actor/pg_loss": 0.1}) + "\n"
    run = L.make_run(events=L.events_from_text(text))
    (f,) = GradNormNotFiniteStepSkipped().detect(run)
    assert "1 warning line" in f.message
    assert not DISAGREES.search(f.message), f.message


def test_an_abrupt_entropy_fall_is_not_said_to_halve_within_zero_steps() -> None:
    rng = np.random.default_rng(0)
    noise = 1 + 0.02 * rng.standard_normal(200)
    entropy = np.r_[np.full(100, 0.6), np.full(100, 0.005)] * noise
    (f,) = EntropyCollapse().detect(make_run({"actor/entropy": entropy}))
    assert "within 0" not in f.message
    assert f"below half its earlier level at step {f.step}" in f.message
    assert f.evidence["halved_by_step"] == f.step
