"""Console text as users paste it: decorations, cut and wrapped records, flattened tracebacks,
W&B's end-of-run block, metrics in other layouts (logscope/ingest/pasted.py and the parser).

Every case is read through both console paths (`read_both`: bulk and line by line) and must agree.
"""

from __future__ import annotations

import json
import math

import pytest
import yaml

from logscope.ingest import pasted
from tests.test_console_reader import read_both, value

STEP = (
    "step:3 - actor/entropy:0.41 - actor/pg_loss:0.02 - actor/grad_norm:0.3 - "
    "critic/score/mean:0.5 - response_length/clip_ratio:0.01"
)
VALUES = {"actor/entropy": 0.41, "actor/pg_loss": 0.02, "critic/score/mean": 0.5}


def _assert_step3(run) -> None:
    assert run.steps.tolist() == [3]
    for metric, expected in VALUES.items():
        assert value(run, metric, 3) == expected
    assert run.parse_stats.skipped_lines == 0


# ---- decorations in front of a line -------------------------------------------------------------


@pytest.mark.parametrize(
    "head",
    [
        "> ",  # a Markdown quote
        "> > ",  # nested
        "2025-07-03T14:20:51.565839352Z ",  # RFC 3339 with nanoseconds (Kubernetes)
        "2025-07-03T14:20:51+02:00 ",
        "2025-07-03T14:20:51.565Z stdout F ",  # CRI container log
        "2025-01-01 10:00:00,123 INFO ",  # Python logging
        "[2025-01-01 10:00:00] ",
        "[pod/trainer-0/main] ",  # kubectl logs --prefix
        "0: ",  # srun --label
        "[rank0]: ",  # torchrun
        "[default3]:",
        "> 2025-07-03T14:20:51Z ",  # stacked
    ],
)
def test_a_step_line_after_a_decoration(tmp_path, head):
    run = read_both(tmp_path, f"{head}(TaskRunner pid=7, ip=10.0.0.2) {STEP}\n")
    _assert_step3(run)
    if "INFO" not in head:  # after a logging level the record is found, the prefix is text
        assert run.meta["ray_actors"] == ["TaskRunner"]


def test_an_indented_excerpt_keeps_its_ray_prefix(tmp_path):
    run = read_both(tmp_path, f"    (TaskRunner pid=7) {STEP}\n")
    _assert_step3(run)
    assert run.meta["ray_actors"] == ["TaskRunner"]


@pytest.mark.parametrize("indent", ["    ", "\t", "  "])
@pytest.mark.parametrize(
    "record",
    [
        f"(TaskRunner pid=7) {STEP[:70]}\n{STEP[70:]}\n",  # wrapped by the terminal
        "step:3\n" + "".join(f"{item}\n" for item in STEP.split(" - ")[1:]),  # one per line
        "x - " + STEP.split(" - ", 1)[1] + "\n",  # copied from mid-line: no `step:N - `
    ],
    ids=["wrapped", "one-per-line", "headless"],
)
def test_an_indented_code_block_keeps_the_rest_of_its_record(tmp_path, indent, record):
    text = "".join(indent + line + "\n" for line in record.splitlines())
    run = read_both(tmp_path, text)
    assert run.metrics["metric"].n_unique() == 5
    assert value(run, "critic/score/mean", run.steps.tolist()[0]) == 0.5


def test_a_step_marker_before_pairs_on_one_line(tmp_path):
    run = read_both(
        tmp_path,
        "epoch 1 step 10: actor/entropy=0.51, actor/kl_loss=0.002, critic/score/mean=0.4\n",
    )
    assert run.steps.tolist() == [10]
    assert value(run, "critic/score/mean", 10) == 0.4


@pytest.mark.parametrize("prose", ["训练log：", "NOTE the log says ", "my run: ", "INFO | "])
def test_a_step_record_after_prose(tmp_path, prose):
    _assert_step3(read_both(tmp_path, f"{prose}{STEP}\n"))


def test_global_step_items_are_not_step_records(tmp_path):
    run = read_both(tmp_path, "summary training/global_step:5 - actor/pg_loss:0.1\n")
    assert run.n_steps == 0


def test_a_timestamped_traceback_keeps_its_shape(tmp_path):
    ts = "2025-07-03T14:20:51.565839352Z "
    lines = [
        "Traceback (most recent call last):",
        '  File "/verl/trainer/main_ppo.py", line 262, in <module>',
        "    main()",
        "ValueError: bad value",
    ]
    run = read_both(tmp_path, "".join(ts + x + "\n" for x in lines))
    (tb,) = run.events
    assert tb.kind == "traceback" and tb.text.split("\n") == lines


TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "/verl/trainer/main_ppo.py", line 262, in <module>',
    "    main()",
    "ValueError: bad value",
]


@pytest.mark.parametrize("indent", ["    ", "\t", "      "])
def test_an_indented_traceback_keeps_its_shape(tmp_path, indent):
    text = "".join(
        indent + x + "\n" for x in [*TRACEBACK, "", "Error executing job with overrides: []"]
    )
    run = read_both(tmp_path, text)
    assert [e.kind for e in run.events] == ["traceback", "config-error"]
    assert run.events[0].text.split("\n") == TRACEBACK


@pytest.mark.parametrize(
    "wrap",
    [
        lambda line: {"log": line + "\n", "stream": "stdout", "time": "2025-07-03T14:20:51Z"},
        lambda line: {"message": line, "timestamp": "2025-07-03T14:20:51Z"},  # Loki, Fluent Bit
    ],
    ids=["docker", "message"],
)
def test_lines_inside_a_collectors_json_records(tmp_path, wrap):
    lines = [f"(TaskRunner pid=7) {STEP}", *TRACEBACK]
    run = read_both(tmp_path, "".join(json.dumps(wrap(x)) + "\n" for x in lines))
    _assert_step3(run)
    (tb,) = run.events
    assert tb.kind == "traceback" and tb.text.split("\n") == TRACEBACK


def test_a_json_line_that_is_no_collector_record_stays_text():
    assert pasted.record_lines('{"step": 3, "data": {"actor/pg_loss": 0.1}}') is None
    assert pasted.record_lines('{"log": "cut') is None
    assert pasted.record_lines('{"log": "step:3 - a/b:1\\n"}') == ["step:3 - a/b:1"]


def test_records_a_paste_joined_are_read_as_their_lines():
    # the first record cut at its start (its text is a JSON string's inside), the last at its end
    line = (
        'WorkerDict pid=6)\\u001b[0m frame #21: PyObject_Call"} {"log":"(WorkerDict pid=6) frame '
        '#22: _PyEval\\n", "stream": "stderr"} {"log":"\\u001b[36m(WorkerDict pid=6, ip='
    )
    assert pasted.record_lines(line) == [
        "WorkerDict pid=6)\x1b[0m frame #21: PyObject_Call",
        "(WorkerDict pid=6) frame #22: _PyEval",
        "\x1b[36m(WorkerDict pid=6, ip=",
    ]
    assert pasted.record_lines('a "} {"b": 1}') is None  # no collector record in it


def test_joined_records_keep_only_their_text():
    # Docker's key order: the cut first record's text ends at its closing quote
    line = (
        '1b[36m(TaskRunner pid=1)\\u001b[0m step:1 - a/b:0.1\\n", "stream": "stdout", "time": '
        '"2025-01-01T00:00:01Z"} {"log":"step:2 - a/b:0.2\\n","stream":"stdout"} '
        '{"log":"(TaskRunner pid=1) step:3 - a/b:0.3\\n","stre'
    )
    assert pasted.record_lines(line) == [
        "1b[36m(TaskRunner pid=1)\x1b[0m step:1 - a/b:0.1",
        "step:2 - a/b:0.2",
        "(TaskRunner pid=1) step:3 - a/b:0.3",
    ]
    deep = '{"log": ' + "[" * 100_000
    assert pasted.record_lines(deep) is None  # nesting deeper than Python's: no record


def test_a_lone_surrogate_in_a_record_becomes_a_replacement_character():
    (line,) = pasted.record_lines('{"log": "ValueError: bad \\ud800 char\\n"}')
    assert line == "ValueError: bad \ufffd char"
    line.encode("utf-8")  # printable: the text report encodes it
    assert pasted.record_lines('{"log": "\\ud83d\\ude00"}') == ["\U0001f600"]  # a pair is one


def test_a_message_naming_a_step_is_not_cut_into_a_record():
    for text in (
        "(TaskRunner pid=1) Checkpoint saved at step:2 - path /ckpt/global_step_2",
        "warmup done at step:200 - switching lr schedule",
    ):
        assert pasted.split_joined(text) is None
    two = "(TaskRunner pid=1) step:1 - a/b:0.1 - c/d:0.5 (TaskRunner pid=1) step:2 - a/b:0.2"
    assert pasted.split_joined(two) == [
        "(TaskRunner pid=1) step:1 - a/b:0.1 - c/d:0.5",
        "(TaskRunner pid=1) step:2 - a/b:0.2",
    ]


def test_lines_a_paste_joined_are_cut_before_each_ray_prefix():
    text = (
        "I get: `askRunner pid=1) Unhandled error: ray::WorkerDict.f() (pid=2, ip=1.2.3.4)"
        ' (TaskRunner pid=1, ip=1.2.3.4) File "/v/base.py", line 700, in func'
        " (TaskRunner pid=1, ip=1.2.3.4) return f(*args)"
    )
    assert pasted.split_joined(text) == [
        "I get: `askRunner pid=1) Unhandled error: ray::WorkerDict.f() (pid=2, ip=1.2.3.4)",
        '(TaskRunner pid=1, ip=1.2.3.4) File "/v/base.py", line 700, in func',
        "(TaskRunner pid=1, ip=1.2.3.4) return f(*args)",
    ]
    # a process's prefix after its actor's is one head; one prefix inside a message is quoted
    two_heads = "(vLLMHttpServer pid=1) (EngineCore pid=2) x (A pid=3) y (B pid=4) z"
    assert pasted.split_joined(two_heads) == [
        "(vLLMHttpServer pid=1) (EngineCore pid=2) x",
        "(A pid=3) y",
        "(B pid=4) z",
    ]
    assert pasted.split_joined("(A pid=1) the actor (WorkerDict pid=2) died") is None


# a quote's `> ` stands once: the lines were joined when the quote was rendered
@pytest.mark.parametrize(("first", "each"), [("", ""), ("", "(TaskRunner pid=1) "), ("> ", "")])
def test_step_lines_a_paste_joined_are_read_as_steps(tmp_path, first, each):
    items = " - actor/pg_loss:{:.3f} - critic/score/mean:0.5"
    lines = [f"{each}step:{i}" + items.format(0.1 * i) for i in (1, 2, 3)]
    run = read_both(tmp_path, first + " ".join(lines) + "\n")
    assert run.steps.tolist() == [1, 2, 3]
    assert value(run, "actor/pg_loss", 3) == pytest.approx(0.3)
    assert run.parse_stats.skipped_lines == 0


def test_a_whitespace_collapsed_traceback_with_a_cut_prefix_is_one_block(tmp_path):
    # GitHub joined the lines and collapsed the indentation; the paste starts inside a prefix
    r = "(TaskRunner pid=9, ip=1.2.3.4)"
    text = (
        "I get: `askRunner pid=9, ip=1.2.3.4) Unhandled error (suppress with "
        "'RAY_IGNORE_UNHANDLED_ERRORS=1'): ray::WorkerDict.actor_rollout_compute_log_prob() "
        f"(pid=7, ip=1.2.3.4) {r} ^^^^^^^^ "
        f'{r} File "/v/single_controller/ray/base.py", line 700, in func '
        f"{r} return getattr(self.worker_dict[key], name)(*args, **kwargs) {r} ^^^^^^^^^^^^ "
        f'{r} File "/v/single_controller/base/decorator.py", line 442, in inner '
        f"{r} return func(*args, **kwargs)\n"
    )
    # Ray's report (its prefix cut) and the frames (one actor's, carets and all): two blocks
    report, frames = read_both(tmp_path, text).events
    assert report.kind == frames.kind == "traceback"
    assert "Unhandled error" in report.text and "compute_log_prob" in report.text
    assert frames.text.count('File "') == 2 and "^^^" in frames.text


def test_a_joined_paste_reads_like_its_lines(tmp_path):
    lines = [
        "(TaskRunner pid=1) Traceback (most recent call last):",
        '(TaskRunner pid=1)   File "/v/main_ppo.py", line 9, in run',
        "(TaskRunner pid=1)     trainer.fit()",
        "(TaskRunner pid=1) ray.exceptions.OutOfMemoryError: Task was killed due to the node"
        " running low on memory.",
    ]
    runs = [read_both(tmp_path, text) for text in (" ".join(lines), "\n".join(lines))]
    kinds = [[(e.kind, e.text) for e in run.events] for run in runs]
    assert kinds[0] == kinds[1] and kinds[0]


def test_github_autolinks_are_undone(tmp_path):
    text = "ray.exceptions.ActorDiedError: The actor died\n        ip: [10.29.214.5](http://10.29.214.5/)\n"
    assert pasted.unlink(text) == text.replace("[10.29.214.5](http://10.29.214.5/)", "10.29.214.5")
    assert (
        pasted.unlink("see [the docs](https://docs.ray.io)")
        == "see [the docs](https://docs.ray.io)"
    )
    # GitHub's links of `#21`, `@name` and commit hashes
    assert (
        pasted.unlink(
            "frame [#21](https://github.com/o/r/pull/21): f [@torch](https://github.com/torch)"
        )
        == "frame #21: f @torch"
    )


def test_decorations_are_only_stripped_at_the_start():
    assert pasted.strip_decorations('  File "x.py", line 3, in f') == '  File "x.py", line 3, in f'
    assert pasted.strip_decorations("a > b at 10:00:00") == "a > b at 10:00:00"
    assert pasted.strip_decorations('>   File "x"') == '  File "x"'


def test_a_ray_line_with_its_own_timestamp_and_second_prefix(tmp_path):
    line = (
        "(raylet) [2025-05-02 10:11:12,345 E 123 123] (raylet) node_manager.cc:3049: 1 Workers "
        "(tasks / actors) killed due to memory pressure (OOM), 0 Workers crashed\n"
    )
    (event,) = read_both(tmp_path, line).events
    assert event.kind == "host-oom" and event.text.startswith("node_manager.cc:3049")


# ---- records cut and wrapped by terminals and copies ---------------------------------------------


def test_one_key_per_line(tmp_path):
    body = STEP.split(" - ")
    text = f"(TaskRunner pid=1, ip=10.4.1.33) {body[0]}\n" + "".join(f" - {x}\n" for x in body[1:])
    _assert_step3(read_both(tmp_path, text))


def test_hard_wrap_inside_keys_and_numbers(tmp_path):
    line = "(TaskRunner pid=1) " + STEP.replace("0.41", "0.4123456789")
    cut = [line[i : i + 37] for i in range(0, len(line), 37)]  # cuts inside tokens
    run = read_both(tmp_path, "\n".join(cut) + "\n")
    assert run.steps.tolist() == [3]
    assert value(run, "actor/entropy", 3) == 0.4123456789
    assert value(run, "response_length/clip_ratio", 3) == 0.01


def test_a_record_whose_step_was_cut_off_is_the_step_after_the_last(tmp_path):
    first = "(TaskRunner pid=1) step:7 - actor/pg_loss:0.1 - critic/score/mean:0.2\n"
    tail = "0.05 - critic/score/mean:0.3 - response_length/clip_ratio:0.25 - timing_s/gen:4.0\n"
    run = read_both(tmp_path, first + "(TaskRunner pid=1) some other line\n" + tail)
    assert run.steps.tolist() == [7, 8]
    assert value(run, "response_length/clip_ratio", 8) == 0.25
    assert not run.has_metric("0.05")


def test_a_cut_record_before_the_first_step_is_the_step_before_it(tmp_path):
    tail = "ritic/score/max:1.0 - critic/score/mean:0.3 - response_length/clip_ratio:0.25\n"
    nxt = "(TaskRunner pid=1) step:12 - actor/pg_loss:0.1 - critic/score/mean:0.2\n"
    run = read_both(tmp_path, tail + "(TaskRunner pid=1) Training Progress tick\n" + nxt)
    assert run.steps.tolist() == [11, 12]
    assert not run.has_metric("ritic/score/max")  # the cut key is not a metric
    assert value(run, "critic/score/mean", 11) == 0.3
    assert any("cut off" in n for n in run.parse_stats.notes)


def test_a_lone_cut_record_is_read_and_said_so(tmp_path):
    run = read_both(tmp_path, "x/y:1.5 - timing_s/gen:5.0 - timing_s/step:9.0\n")
    assert run.steps.tolist() == [1]
    assert value(run, "timing_s/gen", 1) == 5.0
    assert "read as step 1" in " ".join(run.parse_stats.notes)


def test_three_decimal_value_cut_by_a_copy_is_dropped(tmp_path):
    text = (
        "(TaskRunner pid=1) step:9 - actor/pg_loss:0.090 - actor/grad_norm:0.629\n"
        " - critic/score/mean:0.104 - critic/values/mean:0.516 - critic/values/max:0.62\n"
    )
    run = read_both(tmp_path, text)
    assert not run.has_metric("critic/values/max")
    assert run.value_resolution == 0.0005  # the .3f era is still recognised
    assert value(run, "critic/values/mean", 9) == 0.516


def test_a_line_cut_inside_a_traceback_message_is_rejoined(tmp_path):
    head = (
        "(Runner pid=4) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.12 GiB "
        + ("and much more text " * 4)
        + "allocated by P"
    )
    text = (
        "(Runner pid=4) Traceback (most recent call last):\n"
        '(Runner pid=4)   File "/x/torch/_tensor.py", line 648, in backward\n'
        f"{head}\nyTorch, with 30.59 GiB reserved\n"
        "(Runner pid=4) wandb:\n"
    )
    (tb,) = read_both(tmp_path, text).events
    assert tb.text.endswith("allocated by PyTorch, with 30.59 GiB reserved")


RAYLET_SIGTERM = (
    "(raylet) A worker died or was killed while executing a task by an unexpected system error. "
    "To troubleshoot the problem, check the logs for the dead worker. Worker IP address: 10.0.0.239"
    " Worker exit type: SYSTEM_ERROR Worker exit detail: Worker exits unexpectedly by a signal. "
    "Exit code: 1. The process receives a SIGTERM."
)


@pytest.mark.parametrize("width", [74, 101])
def test_a_message_wrapped_at_a_fixed_width_is_rejoined(tmp_path, width):
    """A copy that wrapped every line at one width: the lines after two full lines of one
    length continue the message, whatever they start with (101: `: SYSTEM_ERROR …`) and with
    the blank the wrap fell on (74: `… the dead ` / `worker. …`)."""
    lines = [RAYLET_SIGTERM[i : i + width] for i in range(0, len(RAYLET_SIGTERM), width)]
    (event,) = read_both(tmp_path, "\n".join(lines) + "\n").events
    assert event.text == RAYLET_SIGTERM.removeprefix("(raylet) ")


def test_lines_of_one_length_by_chance_join_no_new_record(tmp_path):
    """Two equal-length lines, then a traceback or an indented line: no join."""
    same = "(raylet) ERROR something failed here and there " + "x" * 20
    text = f'{same}\n{same}\nTraceback (most recent call last):\n  File "a.py", line 1, in f\nValueError: v\n'
    events = read_both(tmp_path, text).events
    assert [e.kind for e in events] == ["error", "error", "traceback"]


def test_a_code_span_opened_before_the_ray_prefix_is_no_part_of_the_line(tmp_path):
    text = "`(TaskRunner pid=2) [2025-07-06 07:14:27,052 C 2 2] task_receiver.cc:219:  Check failed: x\n"
    (event,) = read_both(tmp_path, text).events
    assert event.text == "[F task_receiver.cc:219] Check failed: x"


def test_ansi_codes_in_caret_notation_are_stripped(tmp_path):
    """`^[[36m(TaskRunner pid=1)^[[0m …`: ESC as `cat -v` or `less` shows it, pasted."""
    text = (
        "^[[36m(TaskRunner pid=1)^[[0m step:1 - actor/pg_loss:0.1 - actor/entropy:0.5\n"
        "^[[36m(TaskRunner pid=1)^[[0m ^[[31mRuntimeError: 0 active drivers ([]).^[[0m\n"
    )
    run = read_both(tmp_path, text)
    assert value(run, "actor/entropy", 1) == 0.5
    assert [e.text for e in run.events] == ["RuntimeError: 0 active drivers ([])."]


def test_a_traceback_cut_at_the_top_is_still_a_traceback(tmp_path):
    text = (
        '(Runner pid=4)   File "/x/fsdp_workers.py", line 504, in update_actor\n'
        "(Runner pid=4)     metrics = self.actor.update_policy(data=data)\n"
        "(Runner pid=4) RuntimeError: boom\n"
    )
    (tb,) = read_both(tmp_path, text).events
    assert tb.kind == "traceback" and tb.text.splitlines()[-1] == "RuntimeError: boom"


def test_ray_unhandled_error_opens_a_traceback(tmp_path):
    text = (
        "(Runner pid=1) Unhandled error (suppress with 'RAY_IGNORE_UNHANDLED_ERRORS=1'): "
        "ray::WorkerDict.actor_rollout_update_actor() (pid=2, ip=10.0.0.1)\n"
        '(Runner pid=1)   File "/x/decorator.py", line 207, in inner\n'
        "(Runner pid=1)     return func(*args, **kwargs)\n"
    )
    (tb,) = read_both(tmp_path, text).events
    assert tb.kind == "traceback" and "update_actor" in tb.text and "inner" in tb.text


def test_a_traceback_after_prose_on_its_line(tmp_path):
    text = (
        "(WorkerDict pid=9) [2025-08-15 00:16:56] Scheduler hit an exception: Traceback (most "
        "recent call last):\n"
        '(WorkerDict pid=9)   File "/x/sglang/srt/managers/scheduler.py", line 3000, in run\n'
        "(WorkerDict pid=9)     scheduler.event_loop_overlap()\n"
    )
    (tb,) = read_both(tmp_path, text).events
    assert tb.text.startswith("Scheduler hit an exception: Traceback")
    assert "event_loop_overlap" in tb.text


# ---- flattened text -----------------------------------------------------------------------------


def test_a_flattened_traceback_is_unfolded(tmp_path):
    flat = (
        'Status message: "Traceback (most recent call last):\\n  File \\"/x/main_ppo.py\\", '
        "line 40, in main\\n    run_ppo(config)\\nAssertionError: only support equal chunk. Got "
        'size of DataProto 30 and chunk 8.\\n"'
    )
    (tb,) = read_both(tmp_path, flat + "\n").events  # the lines of line 1: one traceback
    assert (tb.line_no, tb.kind) == (1, "traceback")
    lines = tb.text.splitlines()
    assert lines[0].endswith("Traceback (most recent call last):")
    assert lines[1] == '  File "/x/main_ppo.py", line 40, in main'
    assert lines[3].startswith("AssertionError: only support equal chunk. Got size of DataProto 30")


def test_a_repr_list_of_traceback_lines_is_unfolded():
    text = (
        "['Traceback (most recent call last):\\n', '  File \"a.py\", line 1\\n', 'KeyError: 1\\n']"
    )
    pieces = pasted.unfold(text)
    assert '  File "a.py", line 1' in pieces and "KeyError: 1" in pieces


def test_a_prompt_with_newline_escapes_is_not_a_traceback(tmp_path):
    run = read_both(tmp_path, "(TaskRunner pid=1) [prompt] 'Solve:\\n 2+2'\n")
    assert run.events == []


# ---- W&B's end of run, and metrics in other layouts ---------------------------------------------

WANDB_FOOTER = [
    "wandb:",
    "wandb: Run history:",
    "wandb:               actor/entropy ██▇▇▇▆▅▄",
    "wandb:           critic/score/mean ▁▂▃▄▅▆▇█",
    "wandb:",
    "wandb: Run summary:",
    "wandb:               actor/entropy 0.3125",
    "wandb:           critic/score/mean 0.61",
    "wandb:        training/global_step 140",
    "wandb:",
    "wandb: 🚀 View run exp at: https://wandb.ai/team/proj/runs/abc",
]


def test_wandb_summary_alone_is_the_final_step(tmp_path):
    run = read_both(tmp_path, "".join(f"(TaskRunner pid=3) {x}\n" for x in WANDB_FOOTER))
    assert run.steps.tolist() == [140]
    assert value(run, "actor/entropy", 140) == 0.3125
    assert run.meta["wandb_summary"]["critic/score/mean"] == 0.61
    assert any("run summary" in n for n in run.parse_stats.notes)


def test_wandb_summary_without_a_step_key_takes_the_last_uploaded_step(tmp_path):
    footer = [x for x in WANDB_FOOTER if "global_step" not in x]
    footer.insert(-1, "wandb: uploading history steps 52-54, summary, console lines 120-131")
    run = read_both(tmp_path, "".join(f"{x}\n" for x in footer))
    assert run.steps.tolist() == [54]
    assert any("last uploaded history step" in n for n in run.parse_stats.notes)


def test_wandb_history_alone_is_named_not_read(tmp_path):
    history = [*WANDB_FOOTER[:5], "wandb: uploading history steps 0-54, summary"]
    run = read_both(tmp_path, "".join(f"{x}\n" for x in history))
    assert run.steps.tolist() == []
    (note,) = [n for n in run.parse_stats.notes if "sparklines" in n]
    assert "2 metric(s)" in note and "actor/entropy" in note and "step 54" in note


def test_wandb_summary_with_the_old_entropy_key_is_verl_up_to_03(tmp_path):
    footer = [x.replace("actor/entropy ", "actor/entropy_loss ") for x in WANDB_FOOTER]
    footer = [x for x in footer if "global_step" not in x]
    run = read_both(tmp_path, "".join(f"{x}\n" for x in footer))
    assert run.meta["verl_version"] == "0.1-0.3"


def test_wandb_sparklines_are_never_steps_and_a_logged_run_keeps_its_steps(tmp_path):
    text = f"(TaskRunner pid=3) {STEP}\n" + "".join(
        f"(TaskRunner pid=3) {x}\n" for x in WANDB_FOOTER
    )
    run = read_both(tmp_path, text)
    assert run.steps.tolist() == [3]  # the summary is kept as such, not as another step
    assert run.meta["wandb_summary"]["training/global_step"] == 140
    assert run.events == []


def test_wandb_footer_after_a_crash_is_not_part_of_the_traceback(tmp_path):
    text = (
        "(Runner pid=4) Traceback (most recent call last):\n"
        '(Runner pid=4)   File "/x/a.py", line 1, in f\n'
        "(Runner pid=4) torch.OutOfMemoryError: CUDA out of memory.\n"
        + "".join(f"(Runner pid=4) {x}\n" for x in WANDB_FOOTER[:4])
    )
    (tb,) = read_both(tmp_path, text).events
    assert "wandb" not in tb.text


@pytest.mark.parametrize(
    "layout",
    [
        "step 5\nactor/entropy: 0.35\nactor/kl_loss: 0.002\ncritic/score/mean: 0.5\n",
        "global_step=5\nactor/entropy = 0.35\nactor/kl_loss = 0.002\ncritic/score/mean = 0.5\n",
        "Step: 5\n| actor/entropy | 0.35 |\n| actor/kl_loss | 0.002 |\n| critic/score/mean | 0.5 |\n",
        '{"actor/entropy": 0.35, "actor/kl_loss": 0.002, "critic/score/mean": 0.5, '
        '"training/global_step": 5}\n',
    ],
)
def test_metrics_in_another_layout_are_one_step_and_said_to_be(tmp_path, layout):
    run = read_both(tmp_path, "here is my log at step 5:\n" + layout)
    assert run.steps.tolist() == [5]
    assert value(run, "actor/entropy", 5) == 0.35
    assert value(run, "actor/kl_loss", 5) == 0.002
    assert run.meta["layout"] == "non-native"
    assert any("another layout" in n for n in run.parse_stats.notes)


def test_two_steps_in_another_layout_split_where_a_key_repeats(tmp_path):
    text = "".join(
        f"actor/entropy: {e}\nactor/kl_loss: {k}\ncritic/score/mean: {s}\n"
        for e, k, s in ((0.4, 0.001, 0.3), (0.38, 0.002, 0.35))
    )
    run = read_both(tmp_path, text)
    assert run.steps.tolist() == [1, 2]
    assert value(run, "actor/entropy", 2) == 0.38


def _easyr1_step(step: int, metrics: dict[str, float]) -> str:
    """One step as EasyR1's ConsoleLogger prints it: `Step N`, then `yaml.dump` of the metrics
    split at `/` into nested mappings (verl/utils/logger/logger.py, py_functional.py)."""
    nested: dict = {}
    for key, v in metrics.items():
        *parents, leaf = key.split("/")
        level = nested
        for p in parents:
            level = level.setdefault(p, {})
        level[leaf] = v
    return f"Step {step}\n" + yaml.dump(nested, indent=2)


def test_easyr1_nested_yaml_steps(tmp_path):
    config = "Config\n" + yaml.dump(
        {
            "data": {"max_response_length": 2048},
            "worker": {"actor": {"optim": {"lr": 1e-6}}},
            "trainer": {"logger": ("console", "wandb")},  # yaml.dump writes !!python/tuple
        },
        indent=2,
    )
    steps = [
        {
            "actor/entropy_loss": 0.5 - 0.01 * s,
            "actor/kl_loss": 1e-3 * s,
            "actor/lr": 1e-6,
            "critic/score/mean": 0.25 + 0.05 * s,
            "response_length/clip_ratio": 0.0,
            "timing_s/gen": 40.5,
        }
        for s in (1, 2, 3)
    ]
    steps[2]["actor/kl_loss"] = float("nan")
    text = config + "".join(_easyr1_step(s, m) for s, m in zip((1, 2, 3), steps, strict=True))
    text = "".join(f"(Runner pid=7) {line}\n" for line in text.splitlines())
    run = read_both(tmp_path, text)
    assert run.steps.tolist() == [1, 2, 3]
    assert value(run, "actor/entropy_loss", 2) == pytest.approx(0.48)
    assert value(run, "critic/score/mean", 3) == pytest.approx(0.4)
    assert value(run, "actor/lr", 1) == 1e-6  # YAML's `1.0e-06`
    assert math.isnan(value(run, "actor/kl_loss", 3))  # YAML's `.nan`
    # the config before the first step is the run's config, not a step of metrics
    assert not any(m.startswith(("worker", "data", "optim")) for m in run.metric_names)
    assert run.config()["worker"]["actor"]["optim"]["lr"] == 1e-6
    assert run.config()["data"]["max_response_length"] == 2048
    assert run.config()["trainer"]["logger"] == ["console", "wandb"]
    assert run.meta["layout"] == "non-native"


_TABLE = {
    "step": [1, 2, 3],
    "actor/entropy": [0.52, 0.5, 0.49],
    "critic/score/mean": [0.31, 0.33, 0.3],
    "response_length/clip_ratio": [0.41, 0.45, 0.48],
}


def _markdown_table(table: dict) -> str:
    rows = ["| " + " | ".join(table) + " |", "|" + "---|" * len(table)]
    rows += [
        "| " + " | ".join(str(v) for v in row) + " |" for row in zip(*table.values(), strict=True)
    ]
    return "\n".join(rows) + "\n"


def _dataframe_print(table: dict) -> str:
    # pandas' `DataFrame.to_string()`: the index first, blank-aligned columns
    width = [max(len(k), 6) for k in table]
    rows = ["  " + "  ".join(k.rjust(w) for k, w in zip(table, width, strict=True))]
    for i, row in enumerate(zip(*table.values(), strict=True)):
        rows.append(f"{i} " + "  ".join(str(v).rjust(w) for v, w in zip(row, width, strict=True)))
    return "\n".join(rows) + "\n"


@pytest.mark.parametrize("layout", [_markdown_table, _dataframe_print])
def test_a_table_of_steps_is_read_a_row_a_step(tmp_path, layout):
    run = read_both(tmp_path, "Here are my metrics:\n\n" + layout(_TABLE) + "\nAny idea?\n")
    assert run.steps.tolist() == [1, 2, 3]
    assert value(run, "response_length/clip_ratio", 3) == pytest.approx(0.48)
    assert value(run, "actor/entropy", 1) == pytest.approx(0.52)
    assert "step" not in run.metric_names


def test_a_table_without_a_step_column_is_no_table_of_steps(tmp_path):
    table = {k: v for k, v in _TABLE.items() if k != "step"}
    assert read_both(tmp_path, _markdown_table(table)).n_steps == 0


def test_pandas_to_markdown_with_its_index_column_is_a_table_of_steps(tmp_path):
    text = (
        "|    |   step |   actor/entropy |   critic/score/mean |\n"
        "|---:|-------:|----------------:|--------------------:|\n"
        "|  0 |      1 |            0.52 |                0.31 |\n"
        "|  1 |      2 |            0.5  |                0.33 |\n"
    )
    run = read_both(tmp_path, text)
    assert run.steps.tolist() == [1, 2] and value(run, "critic/score/mean", 2) == 0.33
    assert set(run.metric_names) == {"actor/entropy", "critic/score/mean"}  # not the index


@pytest.mark.parametrize("bad", ["²", "9" * 19, "9" * 5000, "1.5", ""])
def test_a_table_row_with_an_odd_step_ends_the_table(tmp_path, bad):
    rows = _markdown_table(_TABLE).splitlines()
    rows.insert(3, f"| {bad} | 0.5 | 0.3 | 0.4 |")
    run = read_both(tmp_path, "\n".join(rows) + "\n")
    assert run.steps.tolist() == [1]  # the rows before it


def test_end_of_training_after_pasted_metrics_is_no_crash(tmp_path):
    text = (
        "wandb: Run summary:\n"
        "wandb:   actor/entropy 0.4\n"
        "wandb:   critic/score/mean 0.6\n"
        "wandb:   training/global_step 100\n"
        "wandb: 🚀 View run at https://wandb.ai/x/y/runs/z\n"
        "(WorkerDict pid=2) *** SIGTERM received at time=1700000000 on cpu 3 ***\n"
    )
    from logscope.analyze import analyze_run

    run = read_both(tmp_path, text, name="tail.log")
    assert run.meta["run_end"]["wandb_footer"]["after_step"] == 100
    assert "run-crashed" not in {f.name for f in analyze_run(run).findings if f.severity != "info"}


def test_a_crash_after_pasted_metrics_is_after_their_last_step(tmp_path):
    text = _markdown_table(_TABLE) + (
        "Traceback (most recent call last):\n"
        '  File "/v/main_ppo.py", line 3, in main\n'
        "    trainer.fit()\n"
        "ValueError: boom\n"
    )
    (tb,) = read_both(tmp_path, text).events
    assert tb.step_hint == 3


def test_a_native_step_wins_over_loose_pairs(tmp_path):
    text = "notes: actor/entropy: 9.9 critic/score/mean: 9.9 actor/kl_loss: 9.9\n" + STEP + "\n"
    _assert_step3(read_both(tmp_path, text))


def test_a_config_dict_without_metric_keys_is_not_a_step(tmp_path):
    text = "(TaskRunner pid=1) {'answer': 'no', 'index': 99, 'split': 'test'}\n"
    assert read_both(tmp_path, text).n_steps == 0


# ---- Hydra's overrides of a crashed run ---------------------------------------------------------


def test_overrides_of_a_failed_job_are_kept_for_advice(tmp_path):
    from logscope.advice import current_value

    text = (
        "Error executing job with overrides: ['algorithm.adv_estimator=grpo', "
        "'data.train_batch_size=16', \"data.train_files=['/d/train']\", "
        "'+ray_init.runtime_env.env_vars.WANDB_API_KEY=abc123', "
        "'actor_rollout_ref.rollout.tensor_model_parallel_size=4', 'trainer.n_gpus_per_node=2', "
        "'trainer.default_local_dir=/ckpt/q\n"
    )
    run = read_both(tmp_path, text)
    overrides = run.meta["overrides"]
    assert overrides["data.train_batch_size"] == 16
    assert overrides["data.train_files"] == ["/d/train"]
    assert "trainer.default_local_dir" not in overrides  # cut off mid-item
    assert not any("WANDB_API_KEY" in k for k in overrides)  # secrets are never kept
    assert current_value(run, "trainer.n_gpus_per_node") == 2
    assert current_value(run, "actor_rollout_ref.rollout.n") is None  # nothing assumed
    assert run.meta["algorithm"] == "grpo"


# ---- what could not be read is counted, with why -------------------------------------------------


def test_unreadable_metric_lines_are_counted_with_a_reason(tmp_path):
    text = "step:1 - actor/pg_loss:0.1 - actor/grad_norm:??? - critic/score/mean:0.2\nstep:oops\n"
    run = read_both(tmp_path, text)
    reasons = run.parse_stats.skip_reasons
    assert reasons == {
        "step line with an item that is not key:number": 1,
        "starts like a step line but is not one": 1,
    }
    assert run.parse_stats.skipped_lines == 2


# ---- shapes from notes and chat exports ---------------------------------------------------------


def test_a_markdown_list_of_items_after_a_bare_step(tmp_path):
    text = (
        "step:7\n- actor/pg_loss: 0.000\n- actor/entropy: 1.019\n"
        "- timing_s/gen: 71.489\n- timing_s/step: 85.929\n\nSaving actor checkpoint\n"
    )
    run = read_both(tmp_path, text)
    assert run.steps.tolist() == [7]
    assert value(run, "timing_s/gen", 7) == 71.489
    assert value(run, "actor/entropy", 7) == 1.019


def test_a_wandb_summary_copied_as_key_value_lines_keeps_its_step_and_nans(tmp_path):
    text = (
        "_step: 218\ncritic/score/mean: 0.05\nresponse_length/clip_ratio: 1\n"
        "actor/pg_loss: NaN\nactor/grad_norm: NaN\nactor/lr: 7.6e-07\n"
    )
    run = read_both(tmp_path, text)
    assert run.steps.tolist() == [218]
    assert value(run, "critic/score/mean", 218) == 0.05
    for metric in ("actor/pg_loss", "actor/grad_norm"):
        assert value(run, metric, 218) != value(run, metric, 218)  # NaN


def test_wandb_run_summary_step_and_capital_nan(tmp_path):
    text = (
        "wandb: Run summary:\nwandb:             _step 105\nwandb:     actor/pg_loss NaN\n"
        "wandb:     actor/entropy 0.05\nwandb:  critic/score/mean 0.9\n"
    )
    run = read_both(tmp_path, text)
    assert run.steps.tolist() == [105]
    assert "_step" not in run.metric_names
    pg = value(run, "actor/pg_loss", 105)
    assert pg != pg


@pytest.mark.parametrize(
    ("lines", "steps"),
    [
        # two verl metrics, padded, one annotated: a timing table typed by hand
        ("timing_s/step:           43.64\ntiming_s/gen:            31.27   (72%)\n", [1]),
        ("my/thing: 3\nother/thing: 4\n", []),  # two keys nobody knows: not a step
        ("training/global_step: 3\nactor/entropy: 0.4\n", []),  # one metric and the step
    ],
)
def test_two_known_metrics_make_a_step_without_a_step_line(tmp_path, lines, steps):
    run = read_both(tmp_path, lines)
    assert run.steps.tolist() == steps


def test_rank_checkpoint_messages_and_numpy_values_do_not_date_a_log_as_09(tmp_path):
    text = (
        "(TaskRunner pid=1) step:10 - actor/entropy:np.float64(0.5) - actor/pg_loss:0.01 - "
        "timing_s/generate_sequences:12.5 - perf/max_memory_allocated_gb:30.1\n"
        "(WorkerDict pid=2) INFO:2025-08-07 08:43:28,409:[Rank 2] Saved model to /ckpt/step_10\n"
    )
    run = read_both(tmp_path, text)
    assert run.meta["verl_version"] == "0.5-0.6"  # 0.5 keys; on 2025-08-07 main was making 0.6
    v1 = "INFO:2026-03-01 10:00:00,000:Total training steps: 100\n"
    assert read_both(tmp_path, text + v1).meta["verl_version"] == "0.9"


def test_logger_lines_dated_before_09_existed_do_not_date_a_log_as_09(tmp_path):
    """`LEVEL:asctime:` lines are 0.9's logger format, but agent loops printed them in 2025
    too; their date bounds the version (main was developing 0.6 on 2025-09-29)."""
    text = (
        "(TaskRunner pid=1) WARNING:2025-09-29 15:22:24,763:Task rollout-c5 timed out after 60s\n"
        "(TaskRunner pid=1) step:3 - actor/entropy:0.41 - actor/pg_loss:0.02\n"
    )
    assert read_both(tmp_path, text).meta["verl_version"] == "0.5-0.6"
    later = text.replace("2025-09-29", "2026-05-01")
    assert read_both(tmp_path, later).meta["verl_version"] == "0.9"


@pytest.mark.parametrize(
    "line",
    [
        "(TaskRunner pid=1) Size of train dataloader: 29, Size of val dataloader: 1",  # 0.4+
        "(main_task pid=1) Size of train dataloader: 29",  # 0.1-0.3: a line of its own
    ],
)
def test_the_train_dataloader_size_is_kept_as_steps_per_epoch(tmp_path, line):
    run = read_both(tmp_path, line + "\n" + STEP + "\n")
    assert run.meta["train_dataloader_size"] == 29
    _assert_step3(run)
