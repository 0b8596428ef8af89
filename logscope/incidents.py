"""Group findings that tell one story in time into incidents, naming the first mover.

Two findings join when their names belong to a common story (e.g. clip-ratio spike → KL jump →
entropy collapse), or one names the other as its cause (`evidence["consequence_of"]`, e.g. a
length cap hit because a NaN loss makes the model write garbage), and their step spans come
within a window of each other; a finding whose named cause is in its incident is not the
first mover. Every located finding
ends up in exactly one incident; alerts are sent per incident.
"""

from __future__ import annotations

from logscope.model import SEVERITY_RANK, Finding, Incident

# Stories: names in causal order (earlier names are the likelier first movers on a tie).
STORIES: tuple[tuple[str, ...], ...] = (
    (
        "kl-coef-changed-midrun",
        "clip-ratio-spike",
        "grad-norm-spike",
        "kl-jump",
        "kl-out-of-band",
        "entropy-collapse",
        "response-length-collapse",
        "reward-sawtooth",
        "non-finite-metric",
        "grad-norm-not-finite-step-skipped",
    ),
    (
        "memory-leak",
        "throughput-drop",
        "cuda-oom",
        "host-oom-worker-killed",
        "nccl-error",
        "training-stalled",
    ),
    ("rollout-bottleneck", "throughput-drop"),
    ("advantage-collapse", "reward-plateau", "entropy-collapse"),
    ("validation-drop", "reward-sawtooth", "kl-out-of-band"),
)


def _order(name: str) -> int:
    for story in STORIES:
        if name in story:
            return story.index(name)
    return len(STORIES[0])


def _related(a: str, b: str) -> bool:
    return a == b or any(a in s and b in s for s in STORIES)


def _cause_of(f: Finding) -> str | None:
    """The name of the finding `f` says it is a consequence of (`evidence.consequence_of`)."""
    cause = (f.evidence or {}).get("consequence_of")
    return cause.get("name") if isinstance(cause, dict) else None


def _linked(fi: Finding, fj: Finding) -> bool:
    """One story (`STORIES`), or one finding names the other as its cause."""
    return _related(fi.name, fj.name) or fj.name == _cause_of(fi) or fi.name == _cause_of(fj)


def window_for(n_steps: int) -> int:
    """How close in steps two findings must be to join: 5% of the run, between 10 and 50."""
    return int(max(10, min(50, 0.05 * n_steps)))


def group_incidents(findings: list[Finding], n_steps: int) -> list[Incident]:
    """Incidents over `findings` (indices refer to that list). Run-level findings stand alone."""
    window = window_for(n_steps)
    parent = list(range(len(findings)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    located = [i for i, f in enumerate(findings) if f.step is not None]
    for a_pos, i in enumerate(located):
        fi = findings[i]
        i_end = fi.end_step if fi.end_step is not None else fi.step
        for j in located[a_pos + 1 :]:
            fj = findings[j]
            if not _linked(fi, fj):
                continue
            j_end = fj.end_step if fj.end_step is not None else fj.step
            gap = max(fi.step, fj.step) - min(i_end, j_end)  # type: ignore[type-var]
            if gap <= window:
                parent[root(j)] = root(i)

    groups: dict[int, list[int]] = {}
    for i in range(len(findings)):
        groups.setdefault(root(i), []).append(i)

    incidents = []
    for members in groups.values():
        # a finding whose named cause is in the incident is never its first mover
        names = {findings[k].name for k in members}
        members.sort(
            key=lambda k: (
                _cause_of(findings[k]) in names,
                _step_key(findings[k]),
                _order(findings[k].name),
            )
        )
        first = findings[members[0]]
        steps = [findings[k].step for k in members if findings[k].step is not None]
        ends = [
            findings[k].end_step if findings[k].end_step is not None else findings[k].step
            for k in members
            if findings[k].step is not None
        ]
        worst = max((findings[k] for k in members), key=lambda f: SEVERITY_RANK[f.severity])
        others = sorted({findings[k].name for k in members} - {first.name})
        title = first.title if not others else f"{first.title} → " + ", ".join(others)
        incidents.append(
            Incident(
                id=f"{first.name}@{first.step if first.step is not None else 'run'}",
                title=title,
                severity=worst.severity,
                step=min(steps) if steps else None,
                end_step=max(e for e in ends if e is not None) if ends else None,
                first_mover=first.name,
                findings=members,
            )
        )
    incidents.sort(key=lambda inc: (-SEVERITY_RANK[inc.severity], _none_last(inc.step)))
    return incidents


def _step_key(f: Finding) -> float:
    return float(f.step) if f.step is not None else float("inf")


def _none_last(step: int | None) -> float:
    return float(step) if step is not None else float("inf")
