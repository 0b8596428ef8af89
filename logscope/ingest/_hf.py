"""What the Hugging Face Trainer readers share: which keys are whose, and the framework guess.

The HF Trainer logs one dict per logging event (`Trainer.log`): training metrics at a step,
`eval_*` (or `test_*`) metrics from an evaluation at the same step, and once, at the end, a
summary (`train_runtime`, `train_loss`, ...). TRL's trainers add their own metrics to the same
dict (`trl/trainer/grpo_trainer.py` `self._metrics`), without a prefix.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

#: keys of the end-of-training summary (transformers `Trainer.train` → `speed_metrics`)
SUMMARY_KEYS = frozenset(
    {"train_runtime", "train_samples_per_second", "train_steps_per_second", "train_loss"}
)
#: prefixes of evaluation keys (`Trainer.evaluate(metric_key_prefix=...)`)
EVAL_PREFIXES = ("eval_", "test_")
#: keys the HF Trainer itself puts in a training log dict
TRAINER_KEYS = frozenset({"loss", "grad_norm", "learning_rate", "epoch"})


def kind_of(keys: Iterable[str]) -> str:
    """ "summary", "eval" or "train": what one logged dict is."""
    names = [k for k in keys if k not in ("epoch", "step", "total_flos")]
    if any(k in SUMMARY_KEYS for k in names):
        return "summary"
    if names and all(k.startswith(EVAL_PREFIXES) for k in names):
        return "eval"
    return "train"


def framework_meta() -> dict[str, Any]:
    """`framework` for `logscope.frameworks`: "trl", whose profile is the HF Trainer's keys
    (`loss`, `grad_norm`, `learning_rate`) plus TRL's own. Neither file records a version."""
    return {"framework": "trl"}
