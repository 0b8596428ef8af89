"""Live mode: follow a growing verl log, rerun the detectors on new steps, alert once per incident.

What is followed is what verl writes as it trains: its console log, its JSONL file-logger file,
or TensorBoard event files (a file or a run folder). For a console log each cycle reads the new
complete lines (`follow.LineFollower`) and feeds them to the console reader's incremental
parser. A JSONL or TensorBoard source is read again whole, by the reader `analyze` uses, when it
changed (`follow.GrowthWatcher`): about 1 s for 2,000 steps of 150 metrics, once per logged
step (verl logs a step every few seconds to minutes); a source that takes longer than
`THROTTLE_FROM_S` to read is read at most every `READ_BUDGET` × its read time, so re-reading
costs at most 1/READ_BUDGET of a core.

When new steps or events arrived, the detectors rerun, in one of two passes. A full pass runs
every detector over the whole run, as `analyze` does: while the run has at most a window of
steps (`tail_window.Plan`, 420 by default), on the first analysis, when the run has grown by
`FULL_PASS_GROWTH` (10 %) since the last full pass (so its cost per step stays constant), when a
config dump starts a new segment, when the log has been quiet for `FULL_PASS_BUDGET` × the last
full pass's CPU time (at most a tenth of a core), and when tail stops (`close`). Otherwise a
window pass runs the detectors that judge recent steps over the last window of steps only: the
console parser hands over the Run cut to those steps (`ConsoleParser.to_run(since_step=...)`),
whose cost does not grow with the run, and the window's findings replace the full pass's for
the window's last part. Step-local problems (OOM, NaN, KL and gradient spikes) are therefore
seen on the cycle that shows them, as before; whole-run ones (slow leaks, plateaus, lasting
trends) at the next full pass. The last full pass reruns the same detectors on the same data as
`analyze`, which is what makes a live run and `analyze` of the finished file report the same
findings. Findings that need hindsight (a changepoint confirmed only after more steps) appear
when they are confirmed, with the step where they began. This is simpler than streaming
(`update()`) detectors, which every detector would need, and keeps one implementation of each.

An incident is alerted once. Its findings are remembered as (name, step); a later incident that
shares one of them is the same story: if it brought new findings, a short update is sent,
otherwise nothing. A finding of the same name within `cooldown_steps` of an alerted one is not
alerted again.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from logscope.alerts import Alert, Notifier, incident_alert, status_alert
from logscope.aliases import resolve
from logscope.analyze import _finding_order, analyze_run, run_detectors
from logscope.atomic import write_atomic
from logscope.exceptions import IngestError, LogscopeError
from logscope.follow import GrowthWatcher, LineFollower
from logscope.incidents import group_incidents
from logscope.model import SEVERITY_RANK, Run, Source
from logscope.report import Report
from logscope.tail_window import Plan, cut, merge

STATE_VERSION = 1
READ_BUDGET = 10.0
THROTTLE_FROM_S = 0.5
#: a full pass when the run has grown by this share since the last one
FULL_PASS_GROWTH = 0.1
#: on a quiet log, a full pass once this many times its own CPU time has gone by
FULL_PASS_BUDGET = 10.0
#: metric rows the console parser keeps in lists before a frame (the window's cost)
TAIL_COMPACT_ROWS = 5_000
#: the metric concepts (`logscope.aliases`) the live view shows, each under the run's own name
KEY_METRICS = (
    "score_mean",
    "kl_loss",
    "entropy",
    "actor_grad_norm",
    "response_length_mean",
    "time_step",
)


CONSOLE = "verl-console"
# Sources that grow while verl trains; every other reader's input is written once (an export).
FOLLOWED = {
    CONSOLE: "verl console log",
    "verl-jsonl": "verl JSONL file-logger file",
    "tensorboard": "TensorBoard event files",
}
WHAT_TAIL_FOLLOWS = (
    "tail follows what verl writes while it trains, its console log (the file `tee` writes), "
    "its JSONL file-logger file, or a TensorBoard event file or run folder"
)


class NotFollowable(LogscopeError):
    """The path is something `tail` cannot follow (an export, a W&B run, a gzip file, …)."""


def state_dir() -> Path:
    """The user's state folder for logscope: `$XDG_STATE_HOME/logscope`, else
    `~/.local/state/logscope`."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base).expanduser() / "logscope"


def default_outbox() -> Path:
    """Where undelivered alerts wait by default (shared by every tail; filed per run)."""
    return state_dir() / "outbox"


def run_key(path: str | Path) -> str:
    """A run's key for its outbox files: the followed path's name (readable) and a hash of its
    resolved path (unique), e.g. `train.log-3f2a9c81d0e4`."""
    resolved = str(Path(path).expanduser().resolve())
    digest = hashlib.sha256(resolved.encode("utf-8", "surrogateescape")).hexdigest()[:12]
    name = re.sub(r"[^A-Za-z0-9.-]+", "-", Path(resolved).name).strip("-.")[:40]
    return f"{name}-{digest}" if name else digest


def _too_early(path: Path) -> bool:
    """Is the file text without a complete, non-blank line yet (or empty)? Until a line is
    complete, verl's JSONL looks like any text, and a file being created like nothing at all."""
    from logscope.ingest.console import is_text
    from logscope.ingest.files import read_head

    head = read_head(path, 1 << 20)
    if not head:
        return True
    return is_text(head) and not any(line.strip() for line in head.split(b"\n")[:-1])


def _refuse(path: Path, what: str) -> NotFollowable:
    return NotFollowable(
        f"{path} is {what}, which tail does not follow: {WHAT_TAIL_FOLLOWS}. "
        f"To diagnose it as it is now: logscope analyze {path}"
    )


def followed_kind(path: str | Path) -> str | None:
    """The reader kind `tail` follows `path` with, or None while it cannot tell yet (the file is
    missing or holds no complete line). Raises NotFollowable for what cannot be followed."""
    from logscope.ingest import kinds, reader_modules, tensorboard
    from logscope.ingest.files import is_gzip

    p = Path(path)
    if not p.exists():
        return None
    if tensorboard.sniff(p):
        return tensorboard.KIND
    if p.is_file() and _too_early(p):
        return None
    kind = next((m.KIND for m in reader_modules() if m.sniff(p)), None)
    if kind is None:
        if p.is_dir():
            raise NotFollowable(
                f"{p} is a directory without TensorBoard event files; {WHAT_TAIL_FOLLOWS}"
            )
        raise NotFollowable(
            f"{p} holds binary data in no format logscope reads; {WHAT_TAIL_FOLLOWS}"
        )
    what = f"a {kind} source ({kinds()[kind]})"
    if p.is_dir():
        raise _refuse(p, f"a directory holding {what}")
    if is_gzip(p):
        raise _refuse(p, "a gzip-compressed file (never appended to while training)")
    if kind in FOLLOWED:
        return kind
    raise _refuse(p, what)


@dataclass
class TailOptions:
    """Knobs of `logscope tail` (see the CLI for their meaning)."""

    min_severity: str = "warning"
    cooldown_steps: int = 50
    stall_after_s: float | None = None  # None: max(stall_k × median step time, stall_floor_s)
    stall_k: float = 5.0
    stall_floor_s: float = 300.0
    from_start: bool = False
    min_analyze_interval_s: float = 0.0
    only: list[str] | None = None
    skip: list[str] | None = None


@dataclass
class AlertedFinding:
    name: str
    step: int | None


@dataclass
class TailStatus:
    """What the live view shows."""

    step: int | None = None
    steps_seen: int = 0
    steps_per_min: float | None = None
    last_metrics: dict[str, float] = field(default_factory=dict)
    open_incidents: list[str] = field(default_factory=list)
    stalled: bool = False
    notes: list[str] = field(default_factory=list)


class TailSession:
    """One followed log. Call `cycle()` repeatedly (the CLI does, every poll interval)."""

    def __init__(
        self,
        path: str | Path,
        options: TailOptions | None = None,
        notifier: Notifier | None = None,
        state_file: str | Path | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        from logscope.ingest.console import ConsoleParser
        from logscope.settings import for_input

        self.path = Path(path)
        self.options = options or TailOptions()
        self.notifier = notifier
        self.state_file = Path(state_file) if state_file else None
        self.clock = clock
        self.detectors = for_input(self.path).detectors(self.options.only, self.options.skip)
        self.plan = Plan.of(self.detectors)
        self.parser = ConsoleParser(TAIL_COMPACT_ROWS)
        self.alerted: list[AlertedFinding] = []
        self.sent_ids: set[str] = set()
        self.report: Report | None = None
        self.status = TailStatus()
        self._step_arrivals: list[tuple[int, float]] = []
        self._last_step_at: float | None = None
        self._last_analyze = -1e18
        self._dirty = False
        self._stalled = False
        # What the run held when the stall was alerted: only a step beyond it is a resumption.
        self._stall_seen = 0
        self._stall_step: int | None = None
        self._missing_noted = False
        self._next_read_at = -1e18
        self._reset_passes()
        self._run: Run | None = None
        saved = self._load_state()
        if saved is not None:
            self.alerted = [AlertedFinding(a["name"], a["step"]) for a in saved.get("alerted", [])]
            self.sent_ids = set(saved.get("sent_ids", []))
            self._stalled = self.status.stalled = bool(saved.get("stalled", False))
            self._stall_seen = int(saved.get("stall_seen", 0))
            self._stall_step = saved.get("stall_step")
        # The history is always re-read from the start (detectors need it); only what is new is
        # alerted: after a restart with a state file, findings not yet alerted are sent; on a
        # first start without --from-start, what the file already holds is taken as known.
        self._silent_catch_up = saved is None and not self.options.from_start
        self.follower = LineFollower(self.path)
        self.watcher: GrowthWatcher | None = None
        self.kind: str | None = None
        self._decide_kind()

    def _decide_kind(self) -> None:
        """Pick the reader once the path shows what it is (raises NotFollowable)."""
        self.kind = followed_kind(self.path)
        if self.kind is not None and self.kind != CONSOLE:
            self.watcher = GrowthWatcher(self.path)

    @property
    def run(self) -> Run:
        """The run read so far, whole (built on demand from a console log's parser)."""
        if self._run is None:
            self._run = self.parser.to_run(Source(CONSOLE, str(self.path)))
        return self._run

    @property
    def position(self) -> Any:
        """Changes whenever something new was read (the CLI's `--once` stops when it does not)."""
        if self.watcher is not None:
            return self.watcher.seen
        return (self.kind, self.follower.state.inode, self.follower.state.offset)

    # ---- state --------------------------------------------------------------------------
    def _load_state(self) -> dict[str, Any] | None:
        if self.state_file is None or not self.state_file.is_file():
            return None
        try:
            data = json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            return None
        if data.get("version") != STATE_VERSION or data.get("path") != str(self.path.resolve()):
            return None
        return data

    def save_state(self) -> None:
        if self.state_file is None:
            return
        # The follower's offset is not kept: a restarted tail reads the log from its start again
        # (the detectors need the history), and what was alerted tells what is new.
        data = {
            "version": STATE_VERSION,
            "path": str(self.path.resolve()),
            "alerted": [{"name": a.name, "step": a.step} for a in self.alerted],
            "sent_ids": sorted(self.sent_ids),
            "stalled": self._stalled,
            "stall_seen": self._stall_seen,
            "stall_step": self._stall_step,
        }
        write_atomic(self.state_file, json.dumps(data))

    # ---- one cycle ----------------------------------------------------------------------
    def cycle(self) -> list[Alert]:
        """Read what is new, analyse if something changed, decide and queue alerts."""
        now = self.clock()
        self.status.notes = []
        if self.kind is None:
            self._decide_kind()
        if self.kind is None:
            changed, alerts = False, []
            self._note_missing()
        elif self.watcher is None:
            changed, alerts = self._read_lines(now)
        else:
            changed, alerts = self._read_whole(now), []
        if self._dirty and now - self._last_analyze >= self.options.min_analyze_interval_s:
            alerts += self._analyze()
            self._last_analyze = now
            self._dirty = False
        elif (
            not (changed or self._dirty)
            and self._stale
            and now - self._full_at >= self._quiet_wait()
        ):
            alerts += self._analyze(full=True)  # a quiet log: time for the whole run
        alerts += self._check_stall(now)
        if self.notifier is not None:
            for alert in alerts:
                self.notifier.submit(alert)
        # State before delivery: an alert is either in the outbox or remembered as sent, so a
        # crash between the two can neither lose it nor make the next run send it again.
        if alerts or changed:
            self.save_state()
        if self.notifier is not None:
            self.notifier.flush()
        return alerts

    def _note_missing(self) -> None:
        if self.path.exists():
            self._missing_noted = False
        elif not self._missing_noted:
            self.status.notes.append(f"waiting for {self.path} to appear")
            self._missing_noted = True

    def _read_lines(self, now: float) -> tuple[bool, list[Alert]]:
        """A console log: the new complete lines, parsed incrementally."""
        polled = self.follower.poll()
        self.status.notes += polled.notes
        alerts: list[Alert] = []
        lines = polled.lines
        if polled.restarted:
            # The old file's last lines belong to the old run; the new file is a run of its own
            # (what `analyze` of it would read), so the parse starts over. What was alerted is
            # remembered: a copy of the same log re-read from the start alerts nothing again.
            old, lines = lines[: polled.restart_at], lines[polled.restart_at :]
            if old or self._stale:
                if old:
                    self._ingest(old, now)
                alerts += self._analyze(full=True)  # the old run's end
            self._reset_parse()
        if lines:
            self._ingest(lines, now)
        return bool(polled.lines or polled.restarted), alerts

    def _read_whole(self, now: float) -> bool:
        """A JSONL or TensorBoard source: read again by its own reader when it changed."""
        assert self.watcher is not None
        if now < self._next_read_at:
            return False  # a big source, read recently: the change is seen at the next poll
        change = self.watcher.poll()
        self.status.notes += change.notes
        if not change.changed:
            return False
        if change.restarted:
            self._reset_parse()
        started = time.perf_counter()
        self._take(self._read_run(), now)
        took = time.perf_counter() - started
        if took >= THROTTLE_FROM_S:
            self._next_read_at = now + READ_BUDGET * took
        return True

    def _read_run(self) -> Run:
        from logscope.ingest import load

        try:
            runs = load(self.path, source=self.kind)
        except IngestError as exc:  # e.g. truncated by a restart, no record written yet
            self.status.notes.append(str(exc))
            return Run(id="", source=Source(self.kind or CONSOLE, str(self.path)))
        if len(runs) > 1:
            names = ", ".join(r.source.path for r in runs[:5])
            raise NotFollowable(
                f"{self.path} holds {len(runs)} TensorBoard runs ({names}); "
                "tail follows one run: give its folder"
            )
        return runs[0]

    def _ingest(self, lines: list[tuple[int, str]], now: float) -> None:
        """New lines of a console log: parsed on, and counted from the parser (no Run built)."""
        self.parser.feed([t for _, t in lines], lines[0][0])
        self._run = None
        _, steps = self.parser.marks()
        if len(steps) > self._marks_seen:
            final = steps[max(self._marks_seen - 1, 0) : -1]  # the last may still be rejoined
            self._distinct.update(final.tolist())
            if len(final):
                self._top = max(self._top, int(final.max()))
            self._marks_seen = len(steps)
        last = int(steps[-1]) if len(steps) else None
        seen = len(self._distinct) + (last is not None and last not in self._distinct)
        step = None if last is None else max(last, self._top)
        self._progress(seen, step, self.parser.size(), now)

    def _take(self, run: Run, now: float) -> None:
        """Make `run` (read whole) the run so far; note new steps and whether to analyse."""
        steps = run.steps
        self._run = run
        last = int(steps[-1]) if len(steps) else None
        self._progress(len(steps), last, (len(run.events), run.metrics.height), now)

    def _progress(self, seen: int, step: int | None, size: tuple[int, ...], now: float) -> None:
        """Note new steps (for stalls) and whether to analyse (something new was read)."""
        if seen > self.status.steps_seen:
            self._last_step_at = now
            self._step_arrivals.append((step, now))
            self._step_arrivals = self._step_arrivals[-200:]
            self._dirty = True
        if size != self._size_seen:
            self._size_seen = size
            self._dirty = True
        self.status.steps_seen = seen
        self.status.step = step

    def _reset_parse(self) -> None:
        from logscope.ingest.console import ConsoleParser

        self.parser = ConsoleParser(TAIL_COMPACT_ROWS)
        self._run = None
        self._reset_passes()
        self.status.steps_seen = 0
        self.status.step = None
        self._step_arrivals = []
        self._stall_seen, self._stall_step = 0, None  # every step of the new file is new
        self._dirty = True

    def _reset_passes(self) -> None:
        """Forget what was counted and analysed (a new parse starts)."""
        self._size_seen: tuple[int, ...] = ()
        self._marks_seen = 0
        self._distinct: set[int] = set()  # steps of the step lines read, but the last
        self._top = -(1 << 62)  # the highest of them
        self._full: Report | None = None  # the last full pass
        self._full_steps = 0  # steps the run had then
        self._full_segments = 0  # config segments it had then
        self._full_cpu = 0.0  # its CPU time
        self._full_at = -1e18  # when it ended (clock)
        self._stale = False  # analysed since by window passes only
        self.passes = {"full": 0, "window": 0}  # how many of each ran (the live view, tests)
        self.last_pass: str | None = None

    def _quiet_wait(self) -> float:
        return FULL_PASS_BUDGET * self._full_cpu

    def full_pass(self) -> list[Alert]:
        """Analyse the whole run now, as `analyze` would (when tail stops, or to be sure);
        its alerts go to the notifier and are returned."""
        alerts = self._analyze(full=True) if self.kind is not None else []
        if self.notifier is not None:
            for alert in alerts:
                self.notifier.submit(alert)
        return alerts

    def _window(self) -> tuple[int, int] | None:
        """(first step, first settled step) of the window to analyse, or None for a full pass."""
        if self._full is None or self.status.steps_seen <= self.plan.size:
            return None
        if self.status.steps_seen >= (1 + FULL_PASS_GROWTH) * self._full_steps:
            return None
        import numpy as np

        if self.watcher is None:
            steps = self.parser.marks()[1][-self.plan.size :]
        else:
            steps = self.run.steps[-self.plan.size :]
        uniq = np.unique(steps)
        if len(uniq) <= self.plan.margin:
            return None
        return int(uniq[0]), int(uniq[self.plan.margin])

    def _analyze(self, full: bool = False) -> list[Alert]:
        window = None if full else self._window()
        report = None
        if window is not None:
            report = self._window_pass(*window)
        if report is None:
            report = self._full_pass()
        self.report = report
        self._update_status(report)
        return self._alerts(report)

    def _full_pass(self) -> Report:
        started = time.process_time()
        run = self.run
        report = analyze_run(run, self.detectors)
        self._full, self._full_steps = report, self.status.steps_seen
        self._full_segments = len(run.config_segments)
        self._full_cpu = time.process_time() - started
        self._full_at = self.clock()
        self._stale = False
        self.passes["full"] += 1
        self.last_pass = "full"
        return report

    def _window_pass(self, first: int, settled: int) -> Report | None:
        """The window's findings over the last full pass's; None when a full pass is due (a
        config dump started a new segment)."""
        assert self._full is not None
        if self.watcher is None:
            run = self.parser.to_run(Source(CONSOLE, str(self.path)), since_step=first)
        else:
            run = cut(self.run, first)
        if len(run.config_segments) != self._full_segments:
            return None
        found, _, errors = run_detectors(run, self.plan.detectors)
        findings = merge(self._full.findings, found, settled, self.plan.codes)
        findings.sort(key=_finding_order)
        self._stale = True
        self.passes["window"] += 1
        self.last_pass = "window"
        return Report(
            run=run,
            findings=findings,
            incidents=group_incidents(findings, self.status.steps_seen),
            skipped=self._full.skipped,
            errors=list(dict.fromkeys(self._full.errors + errors)),
            health=self._full.health,
            unknown_metrics=self._full.unknown_metrics,
        )

    def _alerts(self, report: Report) -> list[Alert]:
        """Alerts for the incidents of `report` that hold findings not alerted yet."""
        run = report.run
        alerts: list[Alert] = []
        threshold = SEVERITY_RANK[self.options.min_severity]
        run_name = run.meta.get("experiment") or self.path.name
        for incident in report.incidents:
            members = [report.findings[i] for i in incident.findings]
            fresh = [
                i
                for i, f in zip(incident.findings, members, strict=True)
                if not self._known(f.name, f.step)
            ]
            if not fresh:
                continue
            if SEVERITY_RANK[incident.severity] < threshold:
                continue
            for i in fresh:
                f = report.findings[i]
                self.alerted.append(AlertedFinding(f.name, f.step))
            if self._silent_catch_up:
                continue
            known_before = len(fresh) < len(members)
            if known_before:
                sub = type(incident)(**{**incident.to_dict(), "findings": fresh})
                alert = incident_alert(report, sub, run_name, kind="update")
            else:
                alert = incident_alert(report, incident, run_name)
            if alert.id not in self.sent_ids:
                self.sent_ids.add(alert.id)
                alerts.append(alert)
        self._silent_catch_up = False
        return alerts

    def _known(self, name: str, step: int | None) -> bool:
        for a in self.alerted:
            if a.name != name:
                continue
            if a.step is None or step is None:
                if a.step == step:
                    return True
                continue
            if abs(a.step - step) <= self.options.cooldown_steps:
                return True
        return False

    # ---- stall --------------------------------------------------------------------------
    def stall_threshold(self) -> float:
        if self.options.stall_after_s is not None:
            return self.options.stall_after_s
        median = self._median_step_seconds()
        if median is None:
            return self.options.stall_floor_s
        return max(self.options.stall_k * median, self.options.stall_floor_s)

    def _median_step_seconds(self) -> float | None:
        run = self.report.run if self.report is not None else self.run  # the latest steps
        name = resolve(run, "time_step")
        timing = run.series(name)[1] if name is not None else ()
        if len(timing) >= 3:
            return float(statistics.median(timing[-50:]))
        gaps = [
            b[1] - a[1]
            for a, b in zip(self._step_arrivals, self._step_arrivals[1:], strict=False)
            if b[1] > a[1]
        ]
        return float(statistics.median(gaps)) if len(gaps) >= 3 else None

    def _check_stall(self, now: float) -> list[Alert]:
        if self._last_step_at is None:
            return []
        idle = now - self._last_step_at
        fixed = self.options.stall_after_s
        lowest = self.options.stall_floor_s if fixed is None else fixed  # no threshold is lower
        if not self._stalled and idle <= lowest:
            return []  # below any threshold: the idle poll skips the median
        run_name = self.path.name
        if not self._stalled and idle > self.stall_threshold():
            self._stalled = True
            self.status.stalled = True
            self._stall_seen, self._stall_step = self.status.steps_seen, self.status.step
            text = (
                f"no new step for {idle:.0f} s after step {self.status.step} "
                f"(threshold {self.stall_threshold():.0f} s). A hung vLLM engine (rollout.n ≥ 16 is a "
                "known trigger) or a dead worker are the usual causes."
            )
            return [status_alert("stalled", run_name, self.status.step, text, "error")]
        if self._stalled and self._new_step_since_stall() and idle <= self.stall_threshold():
            self._stalled = False
            self.status.stalled = False
            text = f"steps resumed at step {self.status.step}"
            return [status_alert("recovered", run_name, self.status.step, text, "info")]
        return []

    def _new_step_since_stall(self) -> bool:
        """A step the run did not hold when the stall was alerted (not the history that a
        restarted tail reads again)."""
        if self.status.steps_seen > self._stall_seen:
            return True
        step, before = self.status.step, self._stall_step
        return step is not None and before is not None and step > before

    def _update_status(self, report: Report) -> None:
        st = self.status
        if len(self._step_arrivals) >= 2:
            (s0, t0), (s1, t1) = self._step_arrivals[0], self._step_arrivals[-1]
            st.steps_per_min = (s1 - s0) / (t1 - t0) * 60 if t1 > t0 else None
        st.last_metrics = {}
        run = report.run  # a window's run holds the latest steps too
        for concept in KEY_METRICS:
            name = resolve(run, concept)
            if name is not None:
                st.last_metrics[name] = float(run.series(name)[1][-1])
        st.open_incidents = [
            f"{inc.severity} {inc.first_mover} @ {inc.step}"
            for inc in report.incidents
            if SEVERITY_RANK[inc.severity] >= SEVERITY_RANK[self.options.min_severity]
        ]

    def close(self) -> list[Alert]:
        """Stop following: what window passes left unjudged gets a full pass first (so the
        last report is `analyze`'s); its alerts go to the notifier and are returned."""
        alerts = self.full_pass() if self._stale else []
        self.follower.close()
        self.save_state()
        return alerts
