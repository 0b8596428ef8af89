"""Simulated verl runs with injected pathologies and their ground truth.

from logscope.synthetic import simulate, Injection, write_console_log
sim = simulate(300, "grpo", seed=1, inject=[Injection("kl-jump", 150)])
sim.truth            # [Injection("kl-jump", 150, 1.0)]: where it first shows
run = sim.to_run()   # a logscope.model.Run
write_console_log(sim, "run.log")  # the console log verl would have printed
dyn, config = realistic(np.random.default_rng(0), 300, "grpo")   # the dynamics of real runs
sim = simulate(300, "grpo", seed=1, config=config, dynamics=dyn)
# verl 0.6-0.10 metric families (mismatch, rollout correction, fully-async, DAPO, agent loop):
cfg = family_overrides(rollout_corr="decoupled", fully_async=True, agent_loop=True)
sim = simulate(300, "grpo", version="0.9", config=cfg,
               inject=[Injection("train-inference-mismatch", 150)])   # FAMILY_PATHOLOGIES
"""

from logscope.synthetic.config import families, family_overrides
from logscope.synthetic.console import format_step_line, write_console_log
from logscope.synthetic.dynamics import Dynamics, realistic
from logscope.synthetic.pathologies import (
    ALL_PATHOLOGIES,
    FAMILY_PATHOLOGIES,
    PATHOLOGIES,
    not_applicable,
)
from logscope.synthetic.simulate import LEVEL_DEFAULTS, Injection, SimRun, simulate, val_names
from logscope.synthetic.versions import ALL_VERSIONS, VERSIONS

__all__ = [
    "ALL_PATHOLOGIES",
    "ALL_VERSIONS",
    "FAMILY_PATHOLOGIES",
    "LEVEL_DEFAULTS",
    "PATHOLOGIES",
    "VERSIONS",
    "Dynamics",
    "Injection",
    "SimRun",
    "families",
    "family_overrides",
    "format_step_line",
    "not_applicable",
    "realistic",
    "simulate",
    "val_names",
    "write_console_log",
]
