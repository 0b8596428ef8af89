"""Waking `logscope tail` on a change of the followed file (inotify on local disks)."""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

import pytest

from logscope import wake
from logscope.wake import LOCAL_FILESYSTEMS, ChangeWaiter, filesystem_type
from tests._reliability import logscope_argv, subprocess_env
from tests.slack_server import SlackStandIn

MOUNTINFO = """\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
30 22 0:40 / /mnt/shared rw,relatime shared:5 - nfs4 server:/export rw,vers=4.2
31 30 0:41 / /mnt/shared/scratch\\040space rw shared:6 - tmpfs tmpfs rw
32 22 0:42 / /mnt/lustre rw - lustre 10.0.0.1@tcp:/fs rw
"""


def test_filesystem_type_takes_the_longest_mount_point() -> None:
    assert filesystem_type("/home/u/train.log", MOUNTINFO) == "ext4"
    assert filesystem_type("/mnt/shared/run/train.log", MOUNTINFO) == "nfs4"
    assert filesystem_type("/mnt/shared/scratch space/a.log", MOUNTINFO) == "tmpfs"
    assert filesystem_type("/mnt/sharedother/a.log", MOUNTINFO) == "ext4"  # not a prefix match
    assert filesystem_type("/mnt/lustre/x", MOUNTINFO) == "lustre"
    assert filesystem_type("/x", "garbage line\n") is None


def local_or_skip(folder: Path) -> None:
    """Skip where the platform has no inotify for `folder`: its file system is polled."""
    kind = filesystem_type(folder)
    if kind not in LOCAL_FILESYSTEMS:
        pytest.skip(f"{folder} is on {kind or 'an unknown file system'}: polled, no inotify")


def test_a_polled_file_system_sleeps_its_poll_interval(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(wake, "filesystem_type", lambda path: "nfs4")
    log = tmp_path / "train.log"
    log.write_text("")
    waiter = ChangeWaiter(log, poll_interval=0.5)
    assert not waiter.watching and waiter.interval == 0.5
    t = time.monotonic()
    waiter.wait()
    assert 0.4 < time.monotonic() - t < 3.0


def test_a_write_wakes_the_waiter_long_before_its_interval(tmp_path) -> None:
    local_or_skip(tmp_path)
    log = tmp_path / "train.log"
    log.write_text("")
    waiter = ChangeWaiter(log, poll_interval=0.5)
    try:
        assert waiter.watching and waiter.interval >= 5
        (tmp_path / "other.log").write_text("x\n")  # another file in the folder: no wake-up
        threading.Timer(0.3, lambda: log.write_text("step:1 - a:1\n")).start()
        t = time.monotonic()
        waiter.wait()
        assert 0.2 < time.monotonic() - t < 3.0
    finally:
        waiter.close()


def test_tail_alerts_on_a_local_append_without_waiting_for_its_poll(tmp_path) -> None:
    """--poll-interval 60: only the inotify wake-up can deliver the alert within seconds."""
    log = tmp_path / "train.log"
    local_or_skip(tmp_path)
    log.write_text("(TaskRunner pid=1) step:1 - actor/pg_loss:0.1 - actor/grad_norm:1.0\n")
    with SlackStandIn() as slack:
        env = subprocess_env(LOGSCOPE_SLACK_WEBHOOK=slack.url)
        argv = logscope_argv(
            "tail",
            str(log),
            "--no-live",
            "--poll-interval",
            "60",
            "--outbox",
            str(tmp_path / "box"),
        )
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        try:
            assert b"following" in proc.stderr.readline()
            time.sleep(1.0)
            with log.open("a") as f:
                f.write("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
            written = time.monotonic()
            deadline = written + 20
            while not slack.received and time.monotonic() < deadline:
                time.sleep(0.05)
            assert slack.received, "no alert: the append did not wake tail"
            assert time.monotonic() - written < 20
            assert "out of memory" in slack.received[0]["text"].lower()
        finally:
            proc.terminate()
            proc.communicate(timeout=30)


def test_a_write_through_a_symlinked_log_wakes_the_waiter(tmp_path) -> None:
    local_or_skip(tmp_path)
    (tmp_path / "runs").mkdir()
    target = tmp_path / "runs" / "train.log"
    target.write_text("")
    link = tmp_path / "latest.log"
    link.symlink_to(target)
    waiter = ChangeWaiter(link, poll_interval=0.5)
    try:
        assert waiter.watching
        threading.Timer(0.3, lambda: target.write_text("step:1 - a:1\n")).start()
        t = time.monotonic()
        waiter.wait()
        assert time.monotonic() - t < 3.0
    finally:
        waiter.close()
