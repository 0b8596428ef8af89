"""EasyR1 (a verl fork): read from its own console and file logger, known by its config, advised
in its own parameters."""

from __future__ import annotations

import json

from logscope.analyze import analyze_run
from logscope.frameworks import get
from logscope.ingest import load
from logscope.synthetic import Injection, simulate
from logscope.synthetic.framework_formats import write
from logscope.synthetic.frameworks import as_framework


def _run(kind: str | None, seed: int = 3):
    return simulate(300, "grpo", seed=seed, inject=[Injection(kind, 150)] if kind else [])


def test_console_log_is_easyr1_by_its_printed_config(tmp_path):
    sim = _run("kl-jump")
    (run,) = load(write(as_framework(sim, "easyr1"), tmp_path))
    assert run.meta["framework"] == "easyr1"
    assert "verl_version" not in run.meta  # a verl release guessed from verl's keys: not EasyR1's
    assert run.n_steps == 300
    config = run.config()
    assert config["worker"]["actor"]["optim"]["lr"] > 0
    assert config["trainer"]["logger"] == ["console", "wandb"]  # yaml.dump's !!python/tuple
    (finding,) = [f for f in analyze_run(run).findings if f.name == "kl-jump"][:1]
    assert abs(finding.step - sim.truth[0].step) <= 10
    own = {p.name for p in get("easyr1").parameters.values() if p.name}
    named = [a for a in finding.advice if a.parameter in own and a.override]
    assert named and all(a.override.startswith(f"{a.parameter}=") for a in named)
    assert not any(a.parameter.startswith("actor_rollout_ref.") for a in finding.advice)


def test_a_verl_file_logger_record_stays_verl(tmp_path):
    """(EasyR1's own records: tests/test_ingest_jsonl.py)"""
    path = tmp_path / "log.jsonl"
    path.write_text("".join(json.dumps({"step": s, "data": {"actor/pg_loss": 0.1,
                    "critic/score/mean": 0.5, "actor/entropy": 0.4}}) + "\n" for s in (1, 2)))  # fmt: skip
    (run,) = load(path)
    assert run.meta["framework"] == "verl"
