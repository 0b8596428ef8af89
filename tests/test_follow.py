"""The file follower: partial lines, late files, truncation and rotation; nothing lost or doubled."""

from __future__ import annotations

import os

from logscope.follow import FollowState, LineFollower


def _texts(poll) -> list[str]:
    return [t for _, t in poll.lines]


def test_partial_line_waits_for_newline(tmp_path) -> None:
    f = tmp_path / "a.log"
    f.write_bytes(b"one\ntw")
    fol = LineFollower(f)
    assert _texts(fol.poll()) == ["one"]
    with f.open("ab") as fh:
        fh.write(b"o\nthree")
    assert _texts(fol.poll()) == ["two"]
    with f.open("ab") as fh:
        fh.write(b"\n")
    p = fol.poll()
    assert p.lines == [(3, "three")]


def test_waits_for_missing_file(tmp_path) -> None:
    f = tmp_path / "later.log"
    fol = LineFollower(f)
    p = fol.poll()
    assert p.lines == [] and "waiting" in p.notes[0]
    assert fol.poll().notes == []  # said once
    f.write_text("step:1 - x:1\n")
    assert _texts(fol.poll()) == ["step:1 - x:1"]


def test_truncation_starts_over(tmp_path) -> None:
    f = tmp_path / "a.log"
    f.write_text("a\nb\nc\n")
    fol = LineFollower(f)
    assert len(fol.poll().lines) == 3
    f.write_text("x\n")
    p = fol.poll()
    assert p.restarted and "truncated" in p.notes[0]
    assert p.lines == [(1, "x")]


def test_rotation_drains_old_then_follows_new(tmp_path) -> None:
    f = tmp_path / "a.log"
    f.write_text("1\n2\n")
    fol = LineFollower(f)
    assert _texts(fol.poll()) == ["1", "2"]
    with f.open("a") as fh:
        fh.write("3\n")  # written just before rotation, not yet read
    os.rename(f, tmp_path / "a.log.1")
    f.write_text("4\n")
    p = fol.poll()
    assert _texts(p) == ["3", "4"]
    assert any("replaced" in n for n in p.notes)


def test_resume_from_state(tmp_path) -> None:
    f = tmp_path / "a.log"
    f.write_text("1\n2\n")
    fol = LineFollower(f)
    fol.poll()
    state = FollowState.from_dict(fol.state.to_dict())
    fol.close()
    with f.open("a") as fh:
        fh.write("3\n")
    again = LineFollower(f, state)
    assert again.poll().lines == [(3, "3")]


def test_garbled_bytes_are_replaced_not_fatal(tmp_path) -> None:
    f = tmp_path / "a.log"
    f.write_bytes(b"ok\n\xff\xfe bad\n")
    assert _texts(LineFollower(f).poll()) == ["ok", "\ufffd\ufffd bad"]


def test_growth_watcher_sees_growth_truncation_and_new_files(tmp_path) -> None:
    from logscope.follow import GrowthWatcher

    run = tmp_path / "run"
    w = GrowthWatcher(run)
    assert "waiting for" in w.poll().notes[0] and not w.poll().notes  # said once
    run.mkdir()
    (run / "events.1").write_bytes(b"x" * 10)
    first = w.poll()
    assert first.changed and not first.restarted
    assert not w.poll().changed  # idle
    (run / "events.2").write_bytes(b"y")  # a restarted trainer writes a new file: more data
    grown = w.poll()
    assert grown.changed and not grown.restarted
    (run / "events.1").write_bytes(b"x")  # shrank: what was read is gone
    cut = w.poll()
    assert cut.changed and cut.restarted and "truncated" in cut.notes[0]


def test_a_write_in_a_followed_folder_wakes_the_waiter(tmp_path) -> None:
    import threading
    import time

    import pytest

    from logscope.wake import ChangeWaiter

    run = tmp_path / "tensorboard_log" / "exp"
    run.mkdir(parents=True)
    waiter = ChangeWaiter(run, poll_interval=0.5)
    if not waiter.watching:
        pytest.skip("a polled file system: no inotify wake-ups to test")
    try:
        timer = threading.Timer(0.3, (run / "events.out.tfevents.1").write_bytes, [b"x"])
        timer.start()
        t = time.monotonic()
        waiter.wait()  # without the wake-up: its interval, 5 s
        assert time.monotonic() - t < 3.0
        timer.join()
    finally:
        waiter.close()
