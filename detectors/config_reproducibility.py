"""Config rules on reproducibility: shuffle flags that differ, no explicit seed (LS510, LS511;
tuning_knowledge.md §A10–A11).
"""

from __future__ import annotations

from logscope.advice import SEED_GRPO
from logscope.config_view import ConfigView, Hit
from logscope.detector import param
from logscope.verl_config import ACT

from .config_lint import ConfigRule


# tuning_knowledge.md §A10
class ShuffleMismatch(ConfigRule, code="LS510", name="shuffle-mismatch"):
    """`data.shuffle` and `actor.shuffle` differ.

    What it detects:
        `data.shuffle != actor_rollout_ref.actor.shuffle`. Warning when the user
        set one of them, info when the mismatch is verl's defaults (True/False).

    Why it matters:
        The GRPO article says a mismatch misaligns prompts and responses between rollout and
        training.

    Example:
        `data.shuffle=True actor_rollout_ref.actor.shuffle=False` → suggest
        `actor_rollout_ref.actor.shuffle=true`.

    Advice:
        Make `actor.shuffle` equal `data.shuffle`.

    Known false positives:
        By verl's mechanics `actor.shuffle` only reorders samples inside an update, and verl's
        defaults differ, so most runs are fine; this is the GRPO article's advice.

    References:
        seed:grpo-pitfalls §5.
    """

    title = "data.shuffle and actor.shuffle differ"
    default_severity = "info"

    def check(self, v: ConfigView) -> list[Hit]:
        data, actor = v.flag("data.shuffle"), v.flag(f"{ACT}.shuffle")
        if data == actor:
            return []
        touched = v.explicit is not None and (
            v.is_set("data.shuffle") or v.is_set(f"{ACT}.shuffle")
        )
        message = (
            f"data.shuffle={data} but actor.shuffle={actor}. The GRPO article says they must match "
            "or responses and prompts get misaligned. (verl's own defaults differ: "
            "data.shuffle=True, actor.shuffle=False; actor.shuffle only reorders samples inside "
            "an update, so treat this as the GRPO article's advice, not a verl error.)"
        )
        advice = v.advice(
            f"{ACT}.shuffle",
            data,
            "Match data.shuffle, as the GRPO article asks.",
            f"{SEED_GRPO} §5.1",
        )
        return [
            Hit(
                "warning" if touched else "info",
                message,
                {"data.shuffle": data, "actor.shuffle": actor},
                [advice],
                [f"{SEED_GRPO} §5"],
            )
        ]


# tuning_knowledge.md §A11
class SeedUnset(ConfigRule, code="LS511", name="seed-unset"):
    """No explicit seed is set.

    What it detects:
        Neither `data.seed` nor `trainer.seed` set.

    Why it matters:
        The GRPO article asks for a fixed, recorded seed so runs can be compared. verl seeds its
        data sampler with 1 when `data.seed` is absent, so the data order is repeatable anyway.

    Example:
        A command without `data.seed` → suggest `++data.seed=42`.

    Advice:
        `++data.seed=42` (`++` adds the key whether or not the verl version declares it).

    Known false positives:
        Most runs: verl's sampler default makes the data order repeatable; hence info.

    References:
        seed:grpo-pitfalls §5.1; verl:trainer/main_ppo.py (create_rl_sampler).
    """

    title = "No explicit seed"
    default_severity = "info"

    seed: int = param(42, ge=0)

    def check(self, v: ConfigView) -> list[Hit]:
        for key in ("data.seed", "trainer.seed"):
            if v.is_set(key) and v.get(key) is not None:
                return []
        message = (
            "No seed is set (data.seed / trainer.seed). verl seeds its data sampler with 1 when "
            "data.seed is absent, so the data order is repeatable, but the GRPO article asks for "
            "an explicit, recorded seed so that runs can be compared and reproduced."
        )
        advice = v.advice(
            "data.seed",
            self.seed,
            "`++` adds the key whether or not your verl version declares it.",
            f"{SEED_GRPO} §5.1",
            prefix="++",
        )
        return [
            Hit(
                "info",
                message,
                {"data.seed": None, "trainer.seed": None},
                [advice],
                [f"{SEED_GRPO} §5.1", "verl:trainer/main_ppo.py (create_rl_sampler)"],
            )
        ]
