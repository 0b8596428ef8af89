"""Simulated verl runs with injected pathologies and their ground truth.

from logscope.synthetic import simulate, Injection, write_console_log
sim = simulate(300, "grpo", seed=1, inject=[Injection("kl-jump", 150)])
sim.truth            # [Injection("kl-jump", 150, 1.0)]: where it first shows
run = sim.to_run()   # a logscope.model.Run
write_console_log(sim, "run.log")  # the console log verl would have printed
dyn, config = realistic(np.random.default_rng(0), 300, "grpo")   # the dynamics of real runs
sim = simulate(300, "grpo", seed=1, config=config, dynamics=dyn)
"""

from logscope.synthetic.console import format_step_line, write_console_log
from logscope.synthetic.dynamics import Dynamics, realistic
from logscope.synthetic.pathologies import PATHOLOGIES, not_applicable
from logscope.synthetic.simulate import LEVEL_DEFAULTS, Injection, SimRun, simulate, val_names
from logscope.synthetic.versions import VERSIONS

__all__ = [
    "LEVEL_DEFAULTS",
    "PATHOLOGIES",
    "VERSIONS",
    "Dynamics",
    "Injection",
    "SimRun",
    "format_step_line",
    "not_applicable",
    "realistic",
    "simulate",
    "val_names",
    "write_console_log",
]
