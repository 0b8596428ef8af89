"""The metric registry (logscope/data/metrics.toml): coverage of verl's own keys, of every key
in the fixtures, the real logs and the simulator, and the tables derived from it (ALIASES,
LOSS_LIKE_PREFIXES, REFERENCES, TRAPS), which must equal what they were before the registry."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from logscope import aliases, health
from logscope.ingest import load as ingest_load
from logscope.metric_registry import MetricEntry, load, lookup, parse
from logscope.sources import unresolved
from logscope.synthetic import VERSIONS, simulate

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
REAL_LOGS = ROOT.parent / "shared" / "real_logs"
KEYS = json.loads((DATA / "verl_metric_keys.json").read_text(encoding="utf-8"))
DOC_KEYS = json.loads((DATA / "verl_docs_metric_keys.json").read_text(encoding="utf-8"))
LOG_SUFFIXES = {".log", ".jsonl", ".txt", ".csv", ".wandb"}


def _unknown(names) -> list[str]:
    registry = load()
    return sorted(n for n in names if not registry.known(n))


# ---- coverage ----------------------------------------------------------------------------------
@pytest.mark.parametrize("version", sorted(KEYS["versions"]))
def test_every_key_literal_of_verl_is_known(version: str) -> None:
    keys = KEYS["versions"][version]
    assert len(keys) > 30  # the extraction found the trainer's metrics
    assert _unknown(keys) == []


def test_key_literals_cover_the_versions_and_the_families_of_the_brief() -> None:
    versions = KEYS["versions"]
    assert {"0.1", "0.2.0.post2", "0.3.0.post1", "0.4.1", "0.6.1", "0.8.0", "0.9.1"} <= set(
        versions
    )
    v091 = set(versions["0.9.1"])
    for key in (
        "actor/ppo_kl",
        "actor/perf/max_memory_reserved_gb",
        "fully_async/trainer/idle_ratio",
        "training/rollout_actor_probs_pearson_corr",
        "timing_s/agent_loop/num_preempted/max",
        "training/off_policy/trajectory_staleness/mean",
        "separate_async/switch/idle",
    ):
        assert key in v091, key
    assert "timing/gen" in versions["0.1"] and "actor/lr(1e-4)" in versions["0.1"]
    assert any(k.startswith("rollout_corr/") for k in versions["0.6.1"])


def test_every_key_of_verls_metric_dictionary_is_known() -> None:
    assert DOC_KEYS["origin"]["path"].endswith("parameter_and_metrics.md")
    keys = [re.sub(r"\{[^}]*\}", "x", k) for k in DOC_KEYS["keys"]]
    assert len(keys) > 100
    assert _unknown(keys) == []


def _fixture_paths() -> list[Path]:
    found = sorted(
        p for p in (ROOT / "fixtures").rglob("*") if p.is_file() and p.suffix in LOG_SUFFIXES
    )
    # relative parts: a checkout under a folder named "check" must not drop every fixture
    return [p for p in found if "check" not in p.relative_to(ROOT).parts]


def _runs_of(path: Path) -> list:
    try:
        return ingest_load(path)
    except Exception:  # a fixture of an unreadable input: no metrics to know
        return []


def _names_of(path: Path) -> set[str]:
    """The metric names of the verl runs in `path` (other frameworks' keys: their profiles)."""
    return {
        n for run in _runs_of(path) if run.meta.get("framework") == "verl" for n in run.metric_names
    }


def test_every_metric_of_other_frameworks_fixtures_is_known_to_its_profile() -> None:
    from logscope.frameworks import unknown_metrics

    runs = [r for p in _fixture_paths() for r in _runs_of(p) if r.meta["framework"] != "verl"]
    assert {r.meta["framework"] for r in runs} >= {"trl", "roll", "slime", "skyrl", "prime-rl"}
    assert {r.source.path: unknown_metrics(r) for r in runs if unknown_metrics(r)} == {}


def test_every_metric_of_the_fixtures_is_known() -> None:
    names = set().union(*(_names_of(p) for p in _fixture_paths()))
    assert len(names) > 50
    assert _unknown(names) == []


def test_every_metric_of_the_real_logs_is_known() -> None:
    paths = sorted(REAL_LOGS.glob("*.log"))
    assert len(paths) >= 20, REAL_LOGS
    names = set().union(*(_names_of(p) for p in paths))
    assert len(names) > 100
    assert _unknown(names) == []


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("algorithm", ["ppo", "grpo"])
def test_every_metric_of_the_simulator_is_known(version: str, algorithm: str) -> None:
    names = simulate(30, algorithm, seed=0, version=version).metric_order
    assert _unknown(names) == []


@pytest.mark.parametrize("version", ["0.9", "0.10"])
@pytest.mark.parametrize(
    "families",
    [
        {"rollout_corr": "decoupled", "fully_async": True, "filter_groups": True},
        {
            "rollout_corr": "bypass",
            "agent_loop": True,
            "dynamic_resource": True,
            "fully_async": True,
        },
    ],
)
def test_every_metric_of_the_simulated_new_families_is_known(version: str, families) -> None:
    from logscope.synthetic.config import family_overrides

    for config in (
        family_overrides(**families),
        {"trainer.use_v1": False, **family_overrides(**families)},
    ):
        names = simulate(30, "grpo", seed=0, version=version, config=config).metric_order
        assert any("/" in n and n.startswith(("training/", "fully_async/")) for n in names)
        assert _unknown(names) == []


def test_an_unknown_key_is_unknown_and_lookup_picks_the_most_specific_family() -> None:
    assert lookup("nonsense/key") is None and lookup("actor/ppo_kll") is None
    assert lookup("rollout_corr/chi2_token").id == "rollout_corr"
    assert lookup("rollout_corr/rollout_is_mean").id == "rollout_is"
    assert lookup("actor/rollout_corr/kl").id == "rollout_corr"  # bypass mode
    assert lookup("timing_s/gen").id == "time_gen"  # a name beats the timing_s/* pattern
    assert lookup("timing/update_actor").id == "timing"  # verl 0.1
    assert lookup("timing_s/agent_loop/num_preempted/max").id == "num_preempted"
    assert lookup("timing_s/agent_loop/tool_calls/max").id == "agent_loop_timing"
    assert lookup("val-core/openai/gsm8k/reward/mean@1").id == "val_core"
    assert lookup("trainer/idle_ratio") is lookup("fully_async/trainer/idle_ratio")
    assert lookup("perf/max_memory_reserved_gb") is lookup("actor/perf/max_memory_reserved_gb")
    assert lookup("actor/lr(1e-4)") is lookup("actor/lr")


# ---- the registry's own consistency --------------------------------------------------------------
def test_entries_are_complete_and_unique() -> None:
    registry = load()
    ids = [e.id for e in registry.entries]
    assert len(ids) == len(set(ids))
    trainers = {"legacy", "v1", "fully-async", "one-step-off", "fork", "sft"}
    names: dict[str, str] = {}
    for e in registry.entries:
        assert isinstance(e, MetricEntry)
        assert e.keys or e.patterns, e.id
        assert e.meaning and e.versions and e.source and e.concept, e.id
        assert e.trainers and set(e.trainers) <= trainers, e.id
        assert e.nan in ("", "divergence", "empty selection"), e.id
        for key in e.keys:
            assert key not in names, f"{key} in {names.get(key)} and {e.id}"
            names[key] = e.id
        for r in e.ranges:
            assert e.matches(r.key), (e.id, r.key)
        for r in e.renames:
            assert r.old and r.new, e.id
    with pytest.raises(TypeError):
        parse('[[metric]]\nid = "x"\nbogus = 1\n')


def test_every_concept_name_and_reference_is_known_to_the_registry() -> None:
    registry = load()
    for concept, names in registry.concepts.items():
        assert names, concept
        assert _unknown(names) == [], concept
    for ref in registry.references:
        assert ref.concept in registry.concepts, ref.key
    for trap in registry.traps:
        assert trap.verdict in health.VERDICTS, trap


def test_sources_resolve() -> None:
    registry = load()
    texts = [e.source for e in registry.entries] + [r.source for r in registry.references]
    texts += [t.source for t in registry.traps]
    for text in texts:
        assert unresolved(text) == [], text


def test_the_semantic_traps_are_in_the_registry() -> None:
    def traps(key: str) -> str:
        entry = lookup(key)
        assert entry is not None, key
        return " ".join(entry.traps)

    assert "0.9" in traps("response_length/clip_ratio") and "verl#7817" in traps(
        "response_length/clip_ratio"
    )
    assert "not measured" in traps("perf/mfu/actor")
    assert "−1" in traps("timing_s/agent_loop/num_preempted/max")
    assert "GSPO" in traps("actor/pg_clipfrac_lower")
    assert "sums" in traps("timing_s/update_actor") and "sums" in traps("timing_s/step")
    assert "bypass" in traps("actor/rollout_corr/kl")
    assert lookup("training/rollout_probs_diff_mean").nan == "empty selection"
    assert lookup("actor/grad_norm").nan == "divergence"


def test_the_package_data_ships_the_registry() -> None:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert '"data/*.toml"' in text


# ---- the derived tables equal today's -----------------------------------------------------------
FROZEN_ALIASES = {
    "kl_ref": ("actor/kl_loss", "critic/kl", "actor/reward_kl_penalty"),
    "kl_loss": ("actor/kl_loss",),
    "kl_coef": ("actor/kl_coef", "critic/kl_coeff", "actor/reward_kl_penalty_coeff"),
    "ppo_kl": ("actor/ppo_kl",),
    "critic_kl": ("critic/kl",),
    "score_mean": ("critic/score/mean",),
    "reward_mean": ("critic/rewards/mean",),
    "score_max": ("critic/score/max",),
    "score_min": ("critic/score/min",),
    "response_clip_ratio": ("response_length/clip_ratio",),
    "prompt_clip_ratio": ("prompt_length/clip_ratio",),
    "pg_clipfrac": ("actor/pg_clipfrac",),
    "pg_clipfrac_lower": ("actor/pg_clipfrac_lower",),
    "response_length_mean": ("response_length/mean",),
    "response_length_max": ("response_length/max",),
    "pg_loss": ("actor/pg_loss",),
    "actor_grad_norm": ("actor/grad_norm",),
    "critic_grad_norm": ("critic/grad_norm",),
    "entropy": ("actor/entropy", "actor/entropy_loss"),
    "vf_loss": ("critic/vf_loss",),
    "vf_explained_var": ("critic/vf_explained_var",),
    "advantages_mean": ("critic/advantages/mean",),
    "advantages_max": ("critic/advantages/max",),
    "advantages_min": ("critic/advantages/min",),
    "returns_mean": ("critic/returns/mean",),
    "returns_max": ("critic/returns/max",),
    "returns_min": ("critic/returns/min",),
    "values_mean": ("critic/values/mean", "critic/vpred_mean"),
    "lr": ("actor/lr", "actor/lr(1e-4)"),
    "gpu_mem_reserved": ("actor/perf/max_memory_reserved_gb", "perf/max_memory_reserved_gb"),
    "gpu_mem_allocated": ("actor/perf/max_memory_allocated_gb", "perf/max_memory_allocated_gb"),
    "cpu_mem_used": ("actor/perf/cpu_memory_used_gb", "perf/cpu_memory_used_gb"),
    "time_gen": ("timing_s/gen", "timing/gen"),
    "time_step": ("timing_s/step", "perf/time_per_step", "timing/step"),
    "time_per_step": ("perf/time_per_step", "timing_s/step", "timing/step"),
    "throughput": ("perf/throughput",),
    "mfu": ("perf/mfu/actor", "mfu/actor"),
    "num_preempted": (
        "timing_s/agent_loop/num_preempted/max",
        "timing_s/agent_loop/slowest/num_preempted",
    ),
}
FROZEN_LOSS_LIKE_PREFIXES = (
    "actor/pg_loss",
    "actor/loss",
    "actor/kl_loss",
    "actor/ppo_kl",
    "actor/grad_norm",
    "actor/entropy",
    "critic/vf_loss",
    "critic/loss",
    "critic/grad_norm",
    "critic/kl",
    "critic/score/",
    "critic/rewards/",
    "critic/advantages/",
    "critic/returns/",
    "critic/values/",
)


def test_aliases_and_loss_like_prefixes_are_unchanged() -> None:
    # every concept of the old table keeps its names and order; new concepts come after
    assert {c: aliases.ALIASES[c] for c in FROZEN_ALIASES} == FROZEN_ALIASES
    assert list(aliases.ALIASES)[: len(FROZEN_ALIASES)] == list(FROZEN_ALIASES)
    assert all(isinstance(v, tuple) for v in aliases.ALIASES.values())
    # ... and so does every watched prefix (new ones after them: the SFT trainer's)
    frozen = len(FROZEN_LOSS_LIKE_PREFIXES)
    assert aliases.LOSS_LIKE_PREFIXES[:frozen] == FROZEN_LOSS_LIKE_PREFIXES
    assert aliases.LOSS_LIKE_PREFIXES[frozen:] == ("train/loss", "val/loss", "train/grad_norm")
    assert aliases.VALIDATION_PREFIXES == ("val-core/", "val/test_score/", "val-aux/")


def _frozen_references() -> dict[str, health.Reference]:
    """`logscope.health.REFERENCES` as it was written in health.py before the registry."""
    R = health.Reference
    rows = (
        R("entropy", "entropy (nats/token)", "entropy", "nats/token", healthy=(0.1, 2.0),
          alarm_low=0.02, alarm_high=3.0,
          rule="below 0.02: collapsed (the policy is almost deterministic); above 3: "
          "near-random text (uniform over a 150k vocabulary is 11.9); not comparable when "
          "actor.loss_agg_mode sums over tokens",
          source="verl:workers/actor/dp_actor.py (masked mean token entropy); healthy verl "
          "GRPO/PPO runs on math and QA sit at 0.1–0.8"),
        R("kl_ref", "KL to reference", "kl_ref", "nats", healthy=(None, 0.05),
          by_algorithm={"ppo": (None, 0.1)}, alarm_high=0.3,
          rule="above the band the policy drifts from the reference (raise the KL coefficient "
          "or lower the LR); 0.3 nat or more (6× the band's top), or 10× the step before and "
          "above the band: a jump; a low KL early is warm-up",
          source="seed:grpo-pitfalls §3.2 (target 0.01–0.03, above 0.05 too far); "
          "verl:trainer/config/ppo_trainer.yaml (adaptive controller default "
          "algorithm.kl_ctrl.target_kl=0.1, PPO)"),
        R("ppo_kl", "ppo_kl (update size)", "ppo_kl", "nats", healthy=(None, 0.02),
          alarm_high=0.1,
          rule="above 0.02 one update moved the policy far (2× PPO's adaptive-KL target "
          "0.01); 0.1 or more, or 10× the step before and above 0.02: a jump; ≈0 is normal "
          "for on-policy single-epoch updates",
          source="seed:ppo-tuning §4.2 (0.0003–0.0008 tuned); paper:ppo (d_targ = 0.01)"),
        R("pg_clipfrac", "pg_clipfrac", "pg_clipfrac", "fraction of tokens", healthy=(None, 0.2),
          rule="above 0.2 most updates leave the trust region",
          source="seed:ppo-tuning §3.2 (0.005 before tuning, ~0 after)"),
        R("actor_grad_norm", "actor grad norm", "actor_grad_norm", "× grad clip",
          healthy=(None, 5.0),
          rule="above 5× the clip every update is rescaled by the clip (LS131); 10× the step "
          "before and above 5× the clip: a spike",
          source="seed:ppo-tuning §3.2 (7.16 at clip 1.0 before tuning, 4.2–4.8 after)"),
        R("critic_grad_norm", "critic grad norm", "critic_grad_norm", "× grad clip",
          healthy=(None, 5.0), alarm_high=20.0,
          rule="20× the clip or more after warm-up: the critic is far from its targets",
          source="verl:workers/critic/dp_critic.py (norm before clipping); seed:ppo-tuning §4"),
        R("response_clip_ratio", "response clip ratio", "response_clip_ratio",
          "fraction of responses", healthy=(None, 0.1), alarm_high=0.1,
          rule="0.1 or more: many answers are cut before they end (wrong rewards); on verl "
          "0.9 V1 the ratio compares with the padded batch max, so max == cap decides",
          source="seed:ppo-tuning §2.2, §5.2 (0.012 → 0.003 after tuning); verl#7817"),
        R("response_length", "response length mean", "response_length_mean", "tokens",
          healthy=(8.0, None), alarm_low=5.0,
          rule="a mean of 5 tokens or fewer: the policy answers (almost) nothing, too short for "
          "any reasoning or answer format (a short-answer loophole of the reward, or EOS "
          "sampled at once)",
          source="verl:trainer/ppo/metric_utils.py (response_length/mean counts response tokens "
          "per sample); seed:ppo-tuning §5.2"),
        R("score", "score mean (min–max)", "score_mean", "reward",
          rule="min == max in a step: every sample got the same reward (0: the reward never "
          "fires; a constant: stuck, e.g. at the format score)",
          source="verl:trainer/ppo/metric_utils.py (critic/score/*: per-sequence reward)"),
        R("advantages", "advantages (min–max)", "advantages_max", "",
          rule="max and min ~0: no learning signal (every group's samples scored alike)",
          source="verl:trainer/ppo/core_algos.py (compute_grpo_outcome_advantage)"),
        R("gen_share", "generation share of step time", "time_gen", "fraction of timing_s/step",
          healthy=(None, 0.6), alarm_high=0.6,
          rule="0.6 or more, and ≥ 2× the slowest other phase: rollout is the bottleneck "
          "(steps that also ran validation or saved a checkpoint are left out)",
          source="seed:ppo-tuning §2; verl#3116 (timing_s/step includes testing)"),
        R("vf_explained_var", "critic explained variance", "vf_explained_var", "",
          healthy=(0.0, 1.0), alarm_low=-0.5,
          rule="below 0 the critic predicts worse than the mean return; −0.5 or less: far off",
          source="verl:trainer/ppo/metric_utils.py (1 − Var(returns − values)/Var(returns))"),
        R("mfu", "MFU", "mfu", "fraction of peak FLOPs", healthy=(0.1, 1.0),
          rule="0 = not measured (unknown model or GPU); above 1 impossible (wrong peak "
          "FLOPs for this GPU); below 0.1 the GPUs mostly wait",
          source="verl:utils/flops_counter.py; verl#4025, verl#7412"),
        R("gpu_memory", "GPU memory reserved", "gpu_mem_reserved", "GB",
          rule="shown only: the GPU's capacity is not in the log",
          source="verl:workers (torch.cuda.max_memory_reserved, GiB)"),
        R("lr", "actor learning rate", "lr", "",
          rule="shown only; 0.000 in a `.3f` log is a rounded small LR, not 0",
          source="verl:utils/logger/aggregate_logger.py (`.3f` values before verl 0.5: "
          "actor/lr:0.000 for lr 1e-6); verl#2303 (full precision from 0.5)"),
        R("num_preempted", "vLLM preemptions", "num_preempted", "sequences",
          healthy=(None, 0.0),
          rule="above 0: vLLM preempted sequences (KV-cache pressure); −1 = not available",
          source="verl:experimental/agent_loop/agent_loop.py (num_preempted)"),
    )  # fmt: skip
    return {r.key: r for r in rows}


def _frozen_traps() -> tuple[health.Trap, ...]:
    T = health.Trap
    return (
        T("*mfu/*", "== 0", health.NOT_MEASURED,
          "verl's FLOPs counter returns 0 for an unknown model type (and an unknown GPU has "
          "infinite peak FLOPs): not an idle GPU",
          "verl:utils/flops_counter.py; verl#4025, verl#7412",
          "0 = not measured (unknown model or GPU)"),
        T("*mfu/*", "> 1", health.UNRELIABLE,
          "MFU above 1 is impossible: verl's peak-FLOPs table is wrong for this GPU",
          "verl:utils/flops_counter.py (get_device_flops)",
          "above 1 is impossible (wrong peak FLOPs)"),
        T("*num_preempted*", "== -1", health.NOT_MEASURED,
          "the rollout engine does not report preemptions",
          "verl:experimental/agent_loop/agent_loop.py (num_preempted)", "-1 = not available"),
        T("*", "rounded zero", health.ROUNDED,
          "`.3f` logs print 0.000 for |x| < 5e-4 (actor/lr:0.000 for lr 1e-6): not zero",
          "verl:utils/logger/aggregate_logger.py (`.3f` values before verl 0.5)",
          "printed 0.000: |x| < 5e-4"),
        T("val-*", "step 0", health.NO_RANGE,
          "a step:0 line holds only the validation before training: not a training step",
          "verl:trainer/ppo/ray_trainer.py (validation before training is logged as step 0)",
          "validation only"),
    )  # fmt: skip


def test_references_and_traps_are_unchanged() -> None:
    frozen = _frozen_references()
    assert list(health.REFERENCES) == list(frozen)
    for key, ref in frozen.items():
        got = health.REFERENCES[key]
        assert dataclasses.asdict(got) == dataclasses.asdict(ref), key
        assert type(got) is health.Reference
        assert all(type(x) is float for x in got.healthy if x is not None), key
    assert health.TRAPS == _frozen_traps()


def test_a_changed_registry_changes_the_derived_tables() -> None:
    """The tables are views: the loader's output is what they are built from (can fail)."""
    text = (ROOT / "logscope" / "data" / "metrics.toml").read_text(encoding="utf-8")
    changed = parse(text.replace('kl_loss = ["actor/kl_loss"]', 'kl_loss = ["actor/kl"]', 1))
    assert changed.concepts["kl_loss"] == ("actor/kl",)
    assert load().concepts == aliases.ALIASES
    assert load().loss_like_prefixes() == aliases.LOSS_LIKE_PREFIXES


# ---- generators ---------------------------------------------------------------------------------
def test_metrics_docs_are_up_to_date() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_metrics_docs.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr


def test_key_extraction_reads_dict_keys_subscripts_and_timers() -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import gen_metric_keys as gen
    finally:
        sys.path.pop(0)
    source = """
metrics = {"actor/pg_loss": 1, f"rollout_corr/{name}": 2, "not a key": 3, "a.py": 4}
metrics["critic/vf_loss"] = 0
with marked_timer("gen", timing_raw):
    pass
path = "/tmp/x/y"
"""
    keys, timers = gen.literals(source)
    found = {k for k in keys if gen.is_key(k)}
    assert found == {"actor/pg_loss", "rollout_corr/*", "critic/vf_loss"}
    assert timers == {"gen"}
