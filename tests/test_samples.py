"""Printed rollout samples (`[prompt]`/`[response]`/`[ground_truth]`/`[score]`): the model's text
is read as a sample, never as the log's own events, and degenerate responses are diagnosed."""

from __future__ import annotations

import pytest
from logscope.detectors.samples import DegenerateResponses

from logscope.analyze import analyze_run
from logscope.ingest.console import read, read_text
from logscope.model import Run, severity_at_least

T = "(TaskRunner pid=2231)"
W = "(WorkerDict pid=3141)"


def sample(response: str, prefix: str = T, score: str = "0.0") -> str:
    """A sample as verl's naive reward manager prints it, every line with `prefix`."""
    lines = [
        "[prompt] system",
        "You are a helpful assistant.",
        "user",
        "What is 2 + 3?",
        "assistant",
        "",
        f"[response] {response}",
        "[ground_truth] 5",
        f"[score] {score}",
    ]
    text = "\n".join(lines).replace("\n", f"\n{prefix} ") if prefix else "\n".join(lines)
    return (f"{prefix} " if prefix else "") + text + "\n"


def step(n: int, prefix: str = T) -> str:
    lead = f"{prefix} " if prefix else ""
    return (
        f"{lead}step:{n} - actor/entropy:0.52 - actor/pg_loss:0.01 - actor/grad_norm:0.3 - "
        "critic/score/mean:0.4 - critic/score/max:1.0 - critic/score/min:0.0\n"
    )


def both_readers(text: str, tmp_path) -> list[Run]:
    path = tmp_path / "train.log"
    path.write_text(text)
    return [read_text(text), read(path)[0]]


def names(run: Run, at_least: str = "info") -> set[str]:
    return {f.name for f in analyze_run(run).findings if severity_at_least(f.severity, at_least)}


MODEL_WRITES_ERRORS = (
    "The list has 3 items, so x[3] fails:\n"
    "Traceback (most recent call last):\n"
    '  File "main.py", line 3, in <module>\n'
    "IndexError: list index out of range\n"
    "RuntimeError: CUDA out of memory is not the cause here; use x[2]."
)


def test_error_text_in_a_response_is_not_a_crash(tmp_path):
    text = step(1) + sample(MODEL_WRITES_ERRORS, score="1.0") + step(2)
    for run in both_readers(text, tmp_path):
        kinds = [e.kind for e in run.events]
        assert kinds == ["sample-response"]
        event = run.events[0]
        assert event.step_hint == 1
        assert event.text.startswith("[response] The list has 3 items")
        assert event.text.endswith("use x[2].")  # every line of the response, to its end
        assert names(run) == set()


def test_error_text_in_a_prompt_is_not_a_crash(tmp_path):
    text = sample("5").replace("What is 2 + 3?", "Fix: RuntimeError: CUDA out of memory") + step(1)
    for run in both_readers(text, tmp_path):
        assert [e.kind for e in run.events] == ["sample-response"]
        assert "cuda-oom" not in names(run)


def test_a_crash_after_the_sample_is_still_read(tmp_path):
    crash = (
        f"{W} Traceback (most recent call last):\n"
        f'{W}   File "verl/workers/fsdp_workers.py", line 512, in update_actor\n'
        f"{W} torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    )
    text = step(1) + sample("5", score="1.0") + crash
    for run in both_readers(text, tmp_path):
        assert "cuda-oom" in names(run, "error")


def test_without_a_ray_prefix_a_traceback_ends_the_sample(tmp_path):
    """A plain log's sample whose end was cut off: the traceback after it is the log's."""
    cut = sample("5", prefix="").split("[ground_truth]")[0]
    crash = (
        "Traceback (most recent call last):\n"
        '  File "verl/trainer/main_ppo.py", line 64, in main\n'
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    )
    for run in both_readers(step(1, prefix="") + cut + crash, tmp_path):
        assert "cuda-oom" in names(run, "error")
        assert run.events[0].kind == "sample-response"


def test_another_actor_interleaved_keeps_its_own_lines(tmp_path):
    """A sample is per Ray prefix: another actor's error in the middle of it is the log's."""
    parts = sample("5").split("\n")
    parts.insert(8, f"{W} torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.")
    for run in both_readers("\n".join(parts) + step(1), tmp_path):
        assert "cuda-oom" in names(run, "error")


def test_a_step_line_ends_a_sample_without_its_tags(tmp_path):
    text = step(1) + f"{T} [response] 5\n" + step(2) + f"{T} ValueError: bad reward\n"
    for run in both_readers(text, tmp_path):
        assert [e.kind for e in run.events] == ["sample-response", "error"]


EXCLAIM = "!" * 200


@pytest.mark.parametrize("count", [1, 3])
def test_responses_of_one_repeated_character(tmp_path, count):
    text = "".join(step(n) + sample(EXCLAIM) for n in range(1, count + 1)) + step(count + 1)
    for run in both_readers(text, tmp_path):
        found = [f for f in analyze_run(run).findings if f.name == "degenerate-responses"]
        assert len(found) == 1
        f = found[0]
        assert f.severity == ("error" if count > 1 else "warning")
        assert f.step == 1
        assert f.evidence["degenerate"] == {"repeated-character": count}
        assert f"{count} of {count} printed response" in f.message
        assert "token 0" in f.message
        assert [a.parameter for a in f.advice] == ["actor_rollout_ref.rollout.dtype"]
        assert f.advice[0].suggested == "bfloat16"


def test_a_response_that_loops():
    loop = "Let me check. " + "So the answer is 5. But wait, let me check again. " * 30
    healthy = "We add 2 and 3. Two plus three is five, so the answer is 5. #### 5"
    run = read_text(step(1) + sample(healthy) + sample(loop) + step(2))
    found = [f for f in analyze_run(run).findings if f.name == "degenerate-responses"]
    assert len(found) == 1
    assert found[0].severity == "warning"  # one of two
    assert found[0].evidence["degenerate"] == {"loop": 1}
    assert found[0].evidence["printed_responses"] == 2
    assert found[0].advice[0].parameter == "actor_rollout_ref.actor.kl_loss_coef"


@pytest.mark.parametrize(
    "response",
    [
        # the repeated lines of a counting answer (real excerpt 08's shape)
        "o != z.\nu != z.\n" + "z = z.\n" * 8 + "\\boxed{6} z in o-u-z-z-z-z-z-z.",
        "!!!",  # too short to judge
        "=" * 40 + "\nStep 1: 2 + 3 = 5.\nThe answer is 5.\n" + "=" * 40,
        "\n".join(f"Step {i}: add {i}, giving {i * (i + 1) // 2}." for i in range(1, 80)),
        "",
    ],
)
def test_ordinary_responses_are_not_degenerate(response):
    assert DegenerateResponses().judge(response) is None
    run = read_text(step(1) + sample(response) + step(2))
    assert "degenerate-responses" not in names(run)
