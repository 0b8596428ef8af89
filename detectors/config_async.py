"""Config rules on the trainers that sample differently from `main_ppo`'s default loop: DAPO's
dynamic sampling filtering on a shaped reward (LS520) and the fully-async recipe's LR schedule
without a horizon (LS521).

Both read keys verl's main config does not always have: `async_training.*` exists only in the
fully-async recipe's config (`verl/experimental/fully_async_policy/config/`), the overlong
buffer only in the DAPO recipe (`reward_model.overlong_buffer.*`) or as
`+reward.reward_kwargs.overlong_buffer_cfg.*` (verl 0.9). A command that sets them under
`verl.trainer.main_ppo` needs the `+` (LS517 says so); a recipe's own entry is not key-checked.
"""

from __future__ import annotations

from typing import Any

from logscope import verl_config, verl_version
from logscope.config_view import ConfigView, Hit, fmt
from logscope.model import Advice
from logscope.verl_config import ACT

from .config_lint import KL_IN_REWARD, MINI, ConfigRule

FILTER_ENABLE = "algorithm.filter_groups.enable"
FILTER_METRIC = "algorithm.filter_groups.metric"
#: verl 0.9's default metric (`ppo_trainer.yaml`): the canonical reward of the V1 replay buffer
V1_DEFAULT_METRIC, V1_FIRST = "reward", "0.9"
#: where the DAPO overlong penalty is switched on: the recipe (≤ 0.5 layout), verl 0.9's reward
#: loop, and the old place the 0.9 reward loop still moves from
OVERLONG_KEYS = (
    "reward_model.overlong_buffer.enable",
    "reward.reward_kwargs.overlong_buffer_cfg.enable",
    "reward_model.reward_kwargs.overlong_buffer_cfg.enable",
)
MANAGER_KEYS = ("reward_model.reward_manager", "reward.reward_manager.name")
#: filter metrics that include the overlong penalty (and, `seq_final_reward`, the in-reward KL)
SHAPED = {
    "reward": "the canonical reward (rm_scores: the score plus the overlong penalty)",
    "seq_reward": "the sum of token_level_scores (the score plus the overlong penalty)",
    "seq_final_reward": (
        "the sum of token_level_rewards (the score plus the overlong penalty and, with "
        "algorithm.use_kl_in_reward, the KL penalty)"
    ),
}
SRC_FILTER = "verl:trainer/ppo/v1/replay_buffer.py"
SRC_DAPO_MANAGER = "verl:experimental/reward_loop/reward_manager/dapo.py"
SRC_DAPO_RECIPE = "verl-recipe:dapo/dapo_ray_trainer.py"

ASYNC = "async_training"
OPTIMS = (f"{ACT}.optim", "critic.optim")
#: the keys naming an optimizer's LR schedule, in the order verl lets them win: `warmup_style`
#: (deprecated in 0.6, copied over lr_scheduler_type when set), `lr_scheduler_type` (0.6+),
#: Megatron's `lr_decay_style`
SCHEDULE_KEYS = ("warmup_style", "lr_scheduler_type", "lr_decay_style")
TOTAL_ROLLOUT = "rollout.total_rollout_steps"
REQUIRE = f"{ASYNC}.require_batches"
TRIGGER = f"{ASYNC}.trigger_parameter_sync_step"
SRC_ASYNC = "verl:experimental/fully_async_policy/fully_async_main.py"
SRC_COSINE = "verl:utils/torch_functional.py"


class DapoFilterOnShapedReward(ConfigRule, code="LS520", name="dapo-filter-on-shaped-reward"):
    """DAPO's group filter compares a shaped reward instead of accuracy.

    What it detects:
        `algorithm.filter_groups.enable=True` with `algorithm.filter_groups.metric` one of
        `reward` (verl 0.9's default: the V1 replay buffer's canonical reward), `seq_reward` or
        `seq_final_reward` (the DAPO recipe's sums of token-level scores / rewards), while the
        reward is shaped: the DAPO reward manager's overlong penalty is on
        (`reward_model.overlong_buffer.enable`, or `reward.reward_kwargs.overlong_buffer_cfg
        .enable` in verl 0.9), or, for `seq_final_reward`, `algorithm.use_kl_in_reward=True`.

    Why it matters:
        Dynamic sampling drops the groups whose metric is identical across the group: those
        carry no accuracy signal. The overlong penalty gives responses of equal correctness
        different rewards, so all-correct and all-wrong groups survive the filter whenever
        their lengths differ; the batch fills with groups whose only signal is the length
        penalty. The DAPO recipe's scripts filter on `acc`.

    Example:
        `algorithm.filter_groups.enable=True reward.reward_manager.name=dapo
        +reward.reward_kwargs.overlong_buffer_cfg.enable=True` (metric left at verl 0.9's
        default `reward`) → suggest `algorithm.filter_groups.metric=acc`.

    Advice:
        `algorithm.filter_groups.metric=acc` (the reward function must report `acc`: verl's
        `math_dapo` does, and the DAPO reward manager stores a plain float score as `acc`).

    Known false positives:
        `score` is not flagged: verl's DAPO reward manager records it before adding the overlong
        penalty. A custom reward whose `acc` is itself shaped, or a reward manager other than
        verl's DAPO one that ignores the overlong keys, is not seen. An unset metric is taken as
        verl 0.9's `reward`; the DAPO recipe's own config has no default.

    References:
        verl:trainer/ppo/v1/replay_buffer.py; verl:experimental/reward_loop/reward_manager/dapo.py;
        verl-recipe:dapo/dapo_ray_trainer.py.
    """

    title = "DAPO group filter on a shaped reward"

    def check(self, v: ConfigView) -> list[Hit]:
        if not v.flag(FILTER_ENABLE):
            return []
        metric = v.get(FILTER_METRIC)
        defaulted = metric is None
        if defaulted:
            if v.version is not None and verl_version.older_than(v.version, V1_FIRST):
                return []  # no default before verl 0.9 (the DAPO recipe requires one)
            metric = V1_DEFAULT_METRIC
        metric = str(metric)
        if metric not in SHAPED:
            return []
        overlong = next((k for k in OVERLONG_KEYS if v.flag(k)), None)
        managers = {str(m) for k in MANAGER_KEYS if (m := v.get(k)) not in (None, "")}
        # only the DAPO reward manager applies the penalty; verl 0.9's default manager is naive,
        # the recipe's (reward_model.overlong_buffer layout) is dapo
        legacy = overlong == OVERLONG_KEYS[0]
        if overlong is not None and "dapo" not in managers and (managers or not legacy):
            overlong = None
        kl = metric == "seq_final_reward" and v.flag(KL_IN_REWARD)
        if overlong is None and not kl:
            return []
        shaping = " and ".join(
            s
            for s in (
                f"the overlong penalty ({overlong}=True)" if overlong else "",
                "the in-reward KL penalty (algorithm.use_kl_in_reward=True)" if kl else "",
            )
            if s
        )
        which = f"{metric!r} (verl 0.9's default)" if defaulted else repr(metric)
        message = (
            f"DAPO dynamic sampling (algorithm.filter_groups) filters groups on {which}, "
            f"{SHAPED[metric]}, and the reward is shaped by {shaping}. The filter drops a group "
            "only when the metric is equal across it; responses of equal correctness now get "
            "different values, so all-correct and all-wrong groups survive whenever their "
            "lengths differ and the batch fills with groups whose only signal is the shaping. "
            "The DAPO recipe filters on acc."
        )
        evidence: dict[str, Any] = {
            "filter_groups.metric": metric,
            "metric_defaulted": defaulted,
            "overlong_penalty_key": overlong,
            "use_kl_in_reward": kl,
            "reward_managers": sorted(managers),
        }
        advice = v.advice(
            FILTER_METRIC,
            "acc",
            "Filter on accuracy, as the DAPO recipe's scripts do; the reward function must report "
            "acc (verl's math_dapo does; the DAPO reward manager stores a plain float score as "
            "acc).",
            SRC_DAPO_RECIPE,
        )
        refs = [SRC_FILTER, SRC_DAPO_MANAGER, SRC_DAPO_RECIPE]
        return [Hit("warning", message, evidence, [advice], refs)]


def _schedule(v: ConfigView, optim: str) -> tuple[str, str] | None:
    """(key, value) of the schedule that decides `optim`'s LR decay, when it decays."""
    for name in SCHEDULE_KEYS:
        value = v.get(f"{optim}.{name}")
        if value is None or str(value).strip() == "":
            continue
        if str(value).strip().lower() == "constant":
            return None
        return f"{optim}.{name}", str(value)
    return None  # verl's default: constant


class FullyAsyncLrWithoutHorizon(ConfigRule, code="LS521", name="fully-async-lr-without-horizon"):
    """Fully-async training with a decaying LR schedule and no `optim.total_training_steps`.

    What it detects:
        A config of verl's fully-async recipe (it has `async_training.*`) whose actor (or critic)
        optimizer decays its LR (`optim.lr_scheduler_type`, the deprecated `optim.warmup_style`,
        or Megatron's `optim.lr_decay_style`, e.g. `cosine`) while
        `optim.total_training_steps` is -1 (verl's default) or unset.

    Why it matters:
        The fully-async trainer builds its workers, and their LR schedulers, before the
        rollouter computes the number of training steps; its `set_total_train_steps` then only
        changes the driver's copy of the config. So the scheduler's horizon is the configured
        `total_training_steps` (-1): the cosine's progress is `step / max(1, -1 - warmup)`, the
        LR reaches `min_lr` (0 by default) at the first update and swings between `lr` and
        `min_lr` after that (verl#6683 saw lr 0 throughout). `trainer.total_training_steps` is
        not read by this trainer.

    Example:
        `async_training.trigger_parameter_sync_step=4
        actor_rollout_ref.actor.optim.lr_scheduler_type=cosine rollout.total_rollout_steps=51200
        actor_rollout_ref.actor.ppo_mini_batch_size=32` → suggest
        `actor_rollout_ref.actor.optim.total_training_steps=1600` (51,200 / 32 updates).

    Advice:
        Set `optim.total_training_steps` to the number of updates,
        `rollout.total_rollout_steps / (ppo_mini_batch_size × async_training.require_batches)`
        (verl's own `total_train_steps` divides this by `trigger_parameter_sync_step`: it counts
        parameter versions, each of which is that many updates); without
        `rollout.total_rollout_steps`, a constant schedule.

    Known false positives:
        A verl version or fork that seeds the optimizer's steps before building the workers
        (PR verl#6875 proposed it). When the dataset is shorter than
        `rollout.total_rollout_steps`, verl stops earlier and the suggested horizon is too long.

    References:
        verl#6683; verl:experimental/fully_async_policy/fully_async_main.py;
        verl:utils/torch_functional.py.
    """

    title = "Fully-async LR schedule without a horizon"

    def check(self, v: ConfigView) -> list[Hit]:
        if not isinstance(verl_config.get(v.config, ASYNC), dict):
            return []
        hits = []
        for optim in OPTIMS:
            schedule = _schedule(v, optim)
            if schedule is None or (optim.startswith("critic") and not v.is_set(schedule[0])):
                continue  # the critic's only when the user chose a decaying one
            total_key = f"{optim}.total_training_steps"
            total = v.int_(total_key)
            if total is not None and total > 0:
                continue
            hits.append(self._hit(v, optim, schedule, total_key, total))
        return hits

    def _hit(
        self,
        v: ConfigView,
        optim: str,
        schedule: tuple[str, str],
        total_key: str,
        total: int | None,
    ) -> Hit:
        key, value = schedule
        rollout_steps = v.int_(TOTAL_ROLLOUT)
        mini = v.int_(MINI)
        require = v.int_(REQUIRE) or 1
        trigger = v.int_(TRIGGER)
        updates = None
        if rollout_steps and rollout_steps > 0 and mini and mini > 0 and require > 0:
            updates = max(1, rollout_steps // (mini * require))
        shown = " unset (verl's default -1)" if total is None else f"={fmt(total)}"
        message = (
            f"Fully-async training with {key}={value} and {total_key}{shown}: the fully-async "
            "trainer builds its workers' LR scheduler before the rollouter counts the training "
            "steps, and its set_total_train_steps only updates the driver's config, so the "
            f"scheduler's horizon is {total_key} as configured (-1): the cosine's progress is "
            "step / max(1, -1 - warmup), the LR reaches min_lr (0 by default) at the first "
            "update and swings between lr and min_lr after that (verl#6683). "
            "trainer.total_training_steps is not read by this trainer."
        )
        evidence: dict[str, Any] = {
            "schedule_key": key,
            "schedule": value,
            "total_training_steps": total,
            "total_rollout_steps": rollout_steps,
            "ppo_mini_batch_size": mini,
            "require_batches": require,
            "trigger_parameter_sync_step": trigger,
            "updates": updates,
        }
        advice: Advice
        if updates is not None:
            advice = v.advice(
                total_key,
                updates,
                f"The number of updates: rollout.total_rollout_steps / (ppo_mini_batch_size × "
                f"require_batches) = {fmt(rollout_steps)} / ({mini} × {require}). verl's own "
                "total_train_steps also divides by trigger_parameter_sync_step: it counts "
                "parameter versions, each that many updates.",
                "verl#6683",
            )
        else:
            advice = v.advice(
                key,
                "constant",
                "Without rollout.total_rollout_steps the number of updates is not known here; "
                f"or set {total_key} to total rollout samples / (ppo_mini_batch_size × "
                "require_batches).",
                "verl#6683",
            )
        return Hit("warning", message, evidence, [advice], ["verl#6683", SRC_ASYNC, SRC_COSINE])
