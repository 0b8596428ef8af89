"""Build `Advice` from a run's own config: current value, suggested value, ready override."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from logscope import verl_config
from logscope.frameworks import Profile, config_value, profile_of, translate_text
from logscope.model import Advice, Run
from logscope.sources import cite

# The two articles' short ids (`logscope.sources.ARTICLES`); `advise` resolves them.
SEED_GRPO = "seed:grpo-pitfalls"
SEED_PPO = "seed:ppo-tuning"


def current_value(run: Run | None, parameter: str, step: int | None = None) -> Any:
    """The parameter's value in the run's config at `step`; None when the config is unknown.

    A run with a config but without this key gets verl's default for it. A log without a config
    dump may still name the overrides the run was started with (Hydra prints them when a run
    fails): those values count, and nothing else is assumed. A run of another framework gives
    the value of that framework's counterpart in its own config (`logscope.frameworks`).
    """
    if run is None:
        return None
    profile = profile_of(run)
    if not profile.is_verl:  # its own parameter, in its own config; no verl default assumed
        counterpart = profile.parameters.get(parameter)
        if counterpart is None or not counterpart.name:
            return None
        return config_value(run, counterpart.name, step)
    if not run.config_segments:
        return run.meta.get("overrides", {}).get(parameter)
    config = run.config(step)
    value, _ = verl_config.effective(config, parameter, run.meta.get("verl_version"))
    return value


def advise(
    run: Run | None,
    parameter: str,
    rationale: str,
    source: str,
    suggest: Callable[[Any], Any] | Any = None,
    step: int | None = None,
    rule: str | None = None,
) -> Advice:
    """Advice for `parameter`.

    `suggest` is a value, or a function of the current value returning the suggested one.
    When the config is unknown (or the function cannot compute a value) the suggestion is
    the `rule` text and no override is given. `source` (and any citation in `rationale`) is a
    short id, resolved here into what a user can open (`logscope.sources.cite`).
    """
    rationale, source = cite(rationale, short=True), cite(source)
    profile = profile_of(run)
    if not profile.is_verl and not parameter.startswith("env:"):
        return _advise_in(profile, run, parameter, rationale, source, suggest, step, rule)
    current = current_value(run, parameter, step)
    suggested = _suggestion(suggest, current)
    if suggested is None:
        text = rationale if rule is None else f"{rationale} Rule: {rule}"
        if current is None and run is not None and not run.config_segments:
            text += " (The run's config is not in the log, so no value is computed.)"
        return Advice(parameter, current, rule, None, text, source)
    return Advice(
        parameter=parameter,
        current=current,
        suggested=suggested,
        override=verl_config.override(parameter, suggested),
        rationale=rationale,
        source=source,
    )


def _suggestion(suggest: Callable[[Any], Any] | Any, current: Any) -> Any:
    """The suggested value: `suggest` itself, or its value at `current` (None when unknown)."""
    if not callable(suggest):
        return suggest
    try:
        return suggest(current) if current is not None else None
    except (TypeError, ValueError, ZeroDivisionError):
        return None


def _advise_in(
    profile: Profile,
    run: Run | None,
    parameter: str,
    rationale: str,
    source: str,
    suggest: Callable[[Any], Any] | Any,
    step: int | None,
    rule: str | None,
) -> Advice:
    """`advise` for a run of another framework: its own parameter, value and override syntax,
    or a plain statement that it has no counterpart of the verl parameter."""
    rationale = translate_text(rationale, profile)
    counterpart = profile.parameters.get(parameter)
    if counterpart is None or not counterpart.name:
        why = counterpart.none if counterpart is not None else "none known to logscope"
        text = f"{profile.title} has no counterpart of verl's `{parameter}` ({why}). {rationale}"
        return Advice(parameter, None, None, None, text, source)
    name = counterpart.name
    if counterpart.note:
        rationale += f" ({profile.title}: {counterpart.note})"
    current = current_value(run, parameter, step)
    flip = counterpart.inverted and isinstance(current, bool)
    suggested = _suggestion(suggest, (not current) if flip else current)
    if counterpart.inverted and isinstance(suggested, bool):
        suggested = not suggested
    if suggested is None:
        rule = translate_text(rule, profile) if rule else None
        text = rationale if rule is None else f"{rationale} Rule: {rule}"
        if current is None:
            text += f" (The run's {profile.title} config is not known, so no value is computed.)"
        return Advice(name, current, rule, None, text, source)
    return Advice(name, current, suggested, profile.override(name, suggested), rationale, source)


def cited(advice: Advice) -> Advice:
    """`advice` with its source (and any citation in its rationale) resolved, for Advice built
    without `advise` (the config rules)."""
    return replace(advice, rationale=cite(advice.rationale, short=True), source=cite(advice.source))
