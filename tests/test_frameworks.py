"""Framework profiles: detectors read concepts, each framework's keys reach them, advice names
the framework's own parameters."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from logscope import frameworks
from logscope.analyze import analyze_run
from logscope.frameworks import FRAMEWORKS, detect, get, profiles
from logscope.metric_registry import load as load_registry
from logscope.synthetic import Injection, simulate
from logscope.synthetic.frameworks import as_framework, renames

ROOT = Path(__file__).resolve().parents[1]
#: the five frameworks the acceptance line judges on their own formats (the rest: W&B/TB keys)
MAIN = ("trl", "openrlhf", "roll", "skyrl", "slime")
OTHERS = ("prime-rl", "nemo-rl", "areal")
# step tolerance for a changepoint on a simulated run (the bench's table uses the same)
TOLERANCE = 10


def _sim(kind: str | None, seed: int = 3, n: int = 300, step: int = 150):
    return simulate(n, "grpo", seed=seed, inject=[Injection(kind, step)] if kind else [])


def _found(run, name: str) -> list[int]:
    return [f.step for f in analyze_run(run).findings if f.name == name]


# ---- the profiles' data ----------------------------------------------------------------------
def test_every_profile_loads_and_names_known_concepts():
    concepts = set(load_registry().concepts)
    assert tuple(profiles()) == FRAMEWORKS
    for profile in profiles().values():
        assert set(profile.concepts) <= concepts, profile.name
        assert profile.style in ("hydra", "cli", "yaml", "toml")
        assert set(profile.finite) <= {"loss", "grad-norm", "kl", "entropy", "reward"}
        if not profile.is_verl:
            assert profile.identify and profile.concepts and profile.parameters


def test_parameter_tables_map_verl_keys_to_a_name_or_a_reason():
    from logscope.verl_schema import releases, tree

    keys = tree(releases()[-1])
    for profile in profiles().values():
        for verl_key, parameter in profile.parameters.items():
            assert keys.has(verl_key) or verl_key == "trainer.seed", (profile.name, verl_key)
            assert bool(parameter.name) != bool(parameter.none), (profile.name, verl_key)
            if parameter.name:
                assert re.fullmatch(
                    r"[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z_][A-Za-z0-9_-]*)*", parameter.name
                )
                assert parameter.source, (profile.name, verl_key)


def test_unknown_framework_is_a_clear_error():
    from logscope.exceptions import LogscopeError

    with pytest.raises(LogscopeError, match=r"unknown framework 'bogus'.*trl"):
        get("bogus")


# ---- detection from keys -----------------------------------------------------------------------
@pytest.mark.parametrize("framework", MAIN + OTHERS)
def test_a_run_is_recognised_by_its_keys(framework):
    run = as_framework(_sim(None, n=40), framework)
    assert detect(set(run.metric_names)) == framework


def test_verl_runs_stay_verl():
    run = _sim(None, n=40).to_run()
    assert detect(set(run.metric_names)) == "verl"
    assert detect(set()) == "verl"


def test_ingest_assigns_the_detected_framework(tmp_path):
    """A W&B CSV export of a TRL run (train/ keys) is read as TRL; --framework overrides it."""
    from logscope.analyze import analyze_paths

    run = as_framework(_sim(None, n=30), "trl", channel="train/")
    wide = run.metrics.pivot(on="metric", index="step", values="value").sort("step")
    path = tmp_path / "export.csv"
    wide.rename({"step": "_step"}).write_csv(path)
    (report,) = analyze_paths([path], use_cache=False, store_dir=tmp_path / "store")
    assert report.run.meta["framework"] == "trl"
    (forced,) = analyze_paths(
        [path], use_cache=False, store_dir=tmp_path / "store", framework="verl"
    )
    assert forced.run.meta["framework"] == "verl"


# ---- diagnoses on each framework's names --------------------------------------------------------
CASES = [
    ("kl-jump", "kl-jump"),
    ("entropy-collapse", "entropy-collapse"),
    ("clip-ratio-spike", "clip-ratio-spike"),
]


@pytest.mark.parametrize("framework", MAIN)
@pytest.mark.parametrize(("kind", "diagnosis"), CASES)
def test_pathology_found_at_its_step_in_each_framework(framework, kind, diagnosis):
    sim = _sim(kind)
    run = as_framework(sim, framework)
    truth = sim.truth[0].step
    profile = get(framework)
    logs = {
        "kl-jump": profile.names("kl_ref"),
        "entropy-collapse": profile.names("entropy"),
        "clip-ratio-spike": profile.names("response_clip_ratio"),
    }[kind]
    steps = _found(run, diagnosis)
    if not logs:  # the framework does not log the metric: nothing to find, nothing invented
        assert steps == []
        return
    assert steps, f"{diagnosis} not found on {framework}"
    assert abs(steps[0] - truth) <= TOLERANCE


@pytest.mark.parametrize("framework", MAIN + OTHERS)
@pytest.mark.parametrize("seed", [3, 11])
def test_healthy_run_of_each_framework_has_no_warning(framework, seed):
    run = as_framework(_sim(None, seed=seed), framework)
    loud = [f for f in analyze_run(run).findings if f.severity != "info"]
    assert loud == []


@pytest.mark.parametrize("framework", OTHERS)
def test_other_frameworks_diagnosed_from_their_keys(framework):
    run = as_framework(_sim("entropy-collapse"), framework)
    steps = _found(run, "entropy-collapse")
    assert steps and abs(steps[0] - 150) <= TOLERANCE


# ---- advice in the framework's own parameters ---------------------------------------------------
def test_trl_advice_names_beta_with_a_cli_override():
    run = as_framework(_sim("kl-jump"), "trl", channel="train/")
    (finding,) = [f for f in analyze_run(run).findings if f.name == "kl-jump"]
    by_name = {a.parameter: a for a in finding.advice}
    assert "beta" in by_name and "learning_rate" in by_name
    beta = by_name["beta"]
    assert beta.current == 0.001 and beta.suggested > beta.current
    assert beta.override == f"--beta {beta.suggested:g}"
    assert "actor_rollout_ref" not in " ".join(a.rationale for a in finding.advice)


def test_advice_without_a_counterpart_says_so():
    from logscope.advice import advise

    run = as_framework(_sim(None, n=20), "trl")
    advice = advise(
        run, "algorithm.kl_ctrl.kl_coef", "Lower the penalty.", "seed:grpo-pitfalls", 0.0
    )
    assert advice.override is None and advice.suggested is None
    assert advice.rationale.startswith(
        "TRL has no counterpart of verl's `algorithm.kl_ctrl.kl_coef`"
    )


def test_hydra_and_inverted_switches():
    skyrl, slime = get("skyrl"), get("slime")
    assert skyrl.override("trainer.algorithm.kl_loss_coef", 0.002) == (
        "trainer.algorithm.kl_loss_coef=0.002"
    )
    assert slime.override("sglang-disable-radix-cache", True) == "--sglang-disable-radix-cache"
    assert slime.parameters["actor_rollout_ref.rollout.enable_prefix_caching"].inverted


def test_verl_advice_is_unchanged_by_profiles():
    run = _sim("kl-jump").to_run()
    (finding,) = [f for f in analyze_run(run).findings if f.name == "kl-jump"][:1]
    assert all(a.parameter.startswith(("actor_rollout_ref.", "algorithm.")) for a in finding.advice)
    assert all(a.override is None or "=" in a.override for a in finding.advice)


def test_renames_cover_what_detectors_read():
    verl = _sim(None, n=10).to_run()
    names = renames(get("trl"), verl.metric_names, channel="train/")
    assert names["actor/kl_loss"] == "train/kl"
    assert names["response_length/clip_ratio"] == "train/completions/clipped_ratio"
    assert len(set(names.values())) == len(names)


# ---- detectors read concepts, never a framework's keys -------------------------------------------
VERL_PREFIXES = (
    "actor/",
    "critic/",
    "timing_s/",
    "timing/",
    "response_length/",
    "prompt_length/",
    "perf/",
    "training/",
    "rollout_corr/",
    "val-core/",
    "val-aux/",
    "fully_async/",
    "global_seqlen/",
    "train/",
    "response/",
)


def _code_strings(tree: ast.AST):
    """String constants that are not docstrings (docstrings document verl's behaviour)."""
    docs = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and body
        ):
            first = body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docs.add(id(first.value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            yield node.lineno, node.value


def test_no_verl_metric_key_in_detector_code():
    registry = load_registry()
    keys = {k for e in registry.entries for k in e.keys} | {
        n for names in registry.concepts.values() for n in names
    }
    key_re = re.compile(
        r"(?<![\w/])("
        + "|".join(re.escape(k) for k in sorted(keys, key=len, reverse=True))
        + r")(?![\w/])"
    )
    prefix_re = re.compile(r"(?<![\w/.])(" + "|".join(re.escape(p) for p in VERL_PREFIXES) + ")")
    found = []
    for path in sorted((ROOT / "detectors").glob("*.py")):
        for line, text in _code_strings(ast.parse(path.read_text(encoding="utf-8"))):
            if key_re.search(text) or prefix_re.search(text):
                found.append(f"{path.name}:{line}: {text[:60]!r}")
    assert found == []


def test_the_scan_would_catch_a_key():
    tree = ast.parse('"""Reads actor/ppo_kl."""\nX = Series.read(run, "actor/ppo_kl")\n')
    assert [t for _, t in _code_strings(tree)] == ["actor/ppo_kl"]


def test_profile_of_defaults_to_verl():
    assert frameworks.profile_of(None).is_verl


# ---- from each framework's own files ------------------------------------------------------------
NATIVE = {
    "openrlhf": "tensorboard",  # it keeps no local metrics file: its TensorBoard run
    "trl": "hf-trainer-state",
    "roll": "roll-console",
    "skyrl": "skyrl-console",
    "slime": "slime-console",
}


@pytest.mark.parametrize("framework", sorted(NATIVE))
@pytest.mark.parametrize(("kind", "diagnosis"), CASES)
def test_pathology_found_from_the_frameworks_own_file(framework, kind, diagnosis, tmp_path):
    from logscope.ingest import load
    from logscope.synthetic.framework_formats import write

    sim = _sim(kind)
    path = write(as_framework(sim, framework), tmp_path / "run")
    (run,) = load(path)
    assert run.source.kind == NATIVE[framework]
    assert run.meta["framework"] == framework
    steps = _found(run, diagnosis)
    if not get(framework).names(
        {"kl-jump": "kl_ref", "entropy-collapse": "entropy"}.get(kind, "response_clip_ratio")
    ):
        assert steps == []
        return
    assert steps and abs(steps[0] - sim.truth[0].step) <= TOLERANCE


@pytest.mark.parametrize("framework", sorted(NATIVE))
def test_healthy_run_from_the_frameworks_own_file_is_quiet(framework, tmp_path):
    from logscope.ingest import load
    from logscope.synthetic.framework_formats import write

    (run,) = load(write(as_framework(_sim(None, seed=7), framework), tmp_path / "run"))
    assert [f.name for f in analyze_run(run).findings if f.severity != "info"] == []


@pytest.mark.parametrize("framework", MAIN)
def test_kl_advice_names_the_frameworks_own_parameters(framework):
    run = as_framework(_sim("kl-jump"), framework)
    findings = [f for f in analyze_run(run).findings if f.name == "kl-jump"]
    assert findings
    profile = get(framework)
    own = {p.name for p in profile.parameters.values() if p.name}
    for advice in findings[0].advice:
        if advice.parameter in own:
            assert advice.override is None or advice.override == profile.override(
                advice.parameter, advice.suggested
            )
        else:  # a verl parameter it has no counterpart of: said plainly, nothing to paste
            assert advice.rationale.startswith(f"{profile.title} has no counterpart")
            assert advice.override is None
    assert any(a.parameter in own and a.override for a in findings[0].advice)
