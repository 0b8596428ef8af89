"""verl versions the simulator can imitate, and what differs between them (verl_formats.md §1.0)."""

from __future__ import annotations

from logscope import verl_version

VERSIONS: tuple[str, ...] = ("0.1", "0.2", "0.3", "0.4", "0.5", "0.7", "0.8", "0.9")

# Versions simulated beyond VERSIONS. verl 0.10 (main of 2026-08, `0.10.0.dev`) prints its console
# log exactly as 0.9's V1 trainer does (`TaskRunnerV1`, repr values, np.float64 validation
# values); what differs (verl_metrics.md §1):
# - its only new metric keys, `separate_async/{switch,decision}/*`, come from the separate-async
#   V1 trainer (`trainer_separate_async.py`), which the simulator does not imitate: never written;
# - rollout defaults the simulator follows: `rollout.calculate_log_probs: True` (so the
#   training-inference mismatch family `training/rollout_probs_diff_*` is logged by default), the
#   `algorithm.rollout_correction` block (rollout_is/rollout_rs null, bypass_mode false), and the
#   agent-loop block `rollout.agent` (so `timing_s/agent_loop/*` and `response_length_non_aborted/*`
#   are logged by default). 0.9 has the same defaults in verl, but the simulator's 0.9 output
#   keeps its earlier defaults (off) so existing 0.9 fixtures stay byte-identical.
# It is kept out of VERSIONS because tests/test_synthetic.py iterates VERSIONS with string
# comparisons (`version >= "0.5"`) that order "0.10" before "0.2".
EXTRA_VERSIONS: tuple[str, ...] = ("0.10",)
ALL_VERSIONS: tuple[str, ...] = VERSIONS + EXTRA_VERSIONS


def check_version(version: str) -> str:
    """`version` as one of VERSIONS (`0.4.1` → `0.4`); ValueError for anything else."""
    text = str(version).strip().lstrip("v")
    short = ".".join(text.split(".")[:2])
    if short not in ALL_VERSIONS:
        raise ValueError(
            f"unknown verl version {version!r}; choose one of {', '.join(ALL_VERSIONS)}"
        )
    return short


def at_least(version: str, other: str) -> bool:
    """Whether simulated `version` is `other` or later."""
    return verl_version.at_least(version, other)


def repr_era(version: str) -> bool:
    """True from 0.5 on (values printed with repr), False for the `.3f` era (0.1–0.4)."""
    return at_least(version, "0.5")


def driver_name(version: str) -> str:
    """The Ray actor/function name that prints step lines (§1.4)."""
    if not at_least(version, "0.3"):
        return "main_task"
    if at_least(version, "0.9"):
        return "TaskRunnerV1"
    return "TaskRunner"


def first_train_step(version: str) -> int:
    """0.1 numbers training steps from 0; later versions from 1 (§1.3)."""
    return 0 if check_version(version) == "0.1" else 1


def ray_pids(seed: int) -> tuple[int, list[int]]:
    """(driver pid, 8 WorkerDict pids) a simulated run's log uses (shared by events and writer)."""
    driver = 3000 + (int(seed) * 7919) % 60000
    return driver, [driver + 1200 + 37 * rank for rank in range(8)]
