"""Framework profiles: which metric keys a framework logs for each concept detectors read.

Detectors read concepts (`kl_ref`, `entropy`, `response_clip_ratio`, …), never a framework's
keys. A profile (`logscope/data/frameworks/NAME.toml`, data only) says, for one framework, the
key names or fnmatch patterns of each concept, the prefixes its channels add (TRL's
`trainer_state.json` logs `kl`, its W&B and TensorBoard files `train/kl`), which keys identify
it, and its own parameter for each verl parameter logscope's advice names, with the syntax a
user types to set it. verl is one profile among them: its concepts are the metric registry's
(`data/metrics.toml`, version renames included).

The framework of a run is set once, when it is read (`ingest.load` calls `assign`): by the
reader that knows it (a TRL `trainer_state.json`), by `--framework`, or from its keys.

    from logscope.frameworks import profile_of
    profile_of(run).names("kl_ref")   # ('kl', 'train/kl') for a TRL run
"""

from __future__ import annotations

import fnmatch
import functools
import re
import tomllib
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

from logscope.verl_config import get as get_key

if TYPE_CHECKING:
    from logscope.model import Run

VERL = "verl"
#: frameworks with a profile, in the order `detect` prefers them on a tie
FRAMEWORKS = (
    "verl", "trl", "openrlhf", "roll", "skyrl", "slime", "prime-rl", "nemo-rl", "areal", "easyr1",
)  # fmt: skip
#: how many identifying keys a non-verl profile needs before it beats verl's count
MIN_EVIDENCE = 2
#: verl parameters advice names under two keys: the profiles map the first
VERL_ALIASES = {"data.seed": "trainer.seed"}


@dataclass(frozen=True)
class Parameter:
    """A framework's own counterpart of one verl parameter (or `none`: why there is none)."""

    name: str = ""
    source: str = ""
    note: str = ""
    none: str = ""
    inverted: bool = False  # a switch that means the opposite (slime's disable-radix-cache)
    add: str = ""  # Hydra's "+" or "++": a key the default config lacks must be added


@dataclass(frozen=True)
class Profile:
    """One framework's metric names and parameters."""

    name: str
    title: str
    source: str
    concepts: dict[str, tuple[str, ...]]  # concept → names/patterns, prefixes applied
    identify: tuple[str, ...] = ()  # keys (or patterns) only this framework logs
    #: dotted config keys only this framework's config has (a verl fork that logs verl's keys
    #: is known by its config: EasyR1's `worker.actor`)
    config_identify: tuple[str, ...] = ()
    known: tuple[str, ...] = ()  # further keys it logs that are understood, not judged
    style: str = "hydra"  # how a user sets a parameter: hydra | cli | yaml | toml
    flag_prefix: str = "--"
    parameters: dict[str, Parameter] = field(default_factory=dict)
    step_keys: tuple[str, ...] = ()  # a metric that is the real training step (W&B/TB channels)
    notes: dict[str, str] = field(default_factory=dict)  # key pattern → what it really means
    #: metric families that must stay finite (LS001): family → key prefixes
    finite: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: every prefix LS001 watches (a watched key in no family is of family "other")
    watched: tuple[str, ...] = ()
    #: prefixes of the critic's keys (a non-finite critic loss gets the critic's advice)
    critic_prefixes: tuple[str, ...] = ()
    #: prefixes of per-phase seconds (verl's `timing_s/gen`, `timing_s/update_actor`, …)
    timing_prefixes: tuple[str, ...] = ()

    @property
    def is_verl(self) -> bool:
        return self.name == VERL

    def names(self, concept: str) -> tuple[str, ...]:
        """The names (and patterns) this framework logs `concept` under, preferred first."""
        return self.concepts.get(concept, ())

    def resolve(self, run: Run, concept: str) -> str | None:
        """The first of `concept`'s names that `run` logs (a pattern: its first match)."""
        for name in self.names(concept):
            if not _is_pattern(name):
                if run.has_metric(name):
                    return name
                continue
            matches = [n for n in run.metric_names if fnmatch.fnmatchcase(n, name)]
            if matches:
                return matches[0]
        return None

    def finite_family(self, key: str) -> str | None:
        """The LS001 family of `key` ("other" when watched in none), None when not watched."""
        if not key.startswith(self.watched):
            return None
        for family, prefixes in self.finite.items():
            if key.startswith(prefixes):
                return family
        return "other"

    def concept_of(self, key: str) -> str | None:
        """The concept `key` is one of this profile's names for (first in file order)."""
        for concept, names in self.concepts.items():
            if any(key == n or (_is_pattern(n) and fnmatch.fnmatchcase(key, n)) for n in names):
                return concept
        return None

    def note(self, key: str) -> str:
        """What `key` really means where its name misleads ("" when nothing is noted)."""
        for pattern, text in self.notes.items():
            if key == pattern or fnmatch.fnmatchcase(key, pattern):
                return text
        return ""

    def knows(self, key: str) -> bool:
        """True when `key` is one of this profile's concept, identifying or known names (or
        matches one of their patterns)."""
        names = (*(n for group in self.concepts.values() for n in group), *self.identify)
        return any(
            key == n or (_is_pattern(n) and fnmatch.fnmatchcase(key, n))
            for n in (*names, *self.known)
        )

    def evidence(self, metric_names: Any) -> int:
        """How many of the keys that identify this framework a run has."""
        return sum(
            1
            for pattern in self.identify
            if (pattern in metric_names)
            or (_is_pattern(pattern) and any(fnmatch.fnmatchcase(n, pattern) for n in metric_names))
        )

    def override(self, name: str, value: Any) -> str:
        """The text a user types to set `name` to `value`, in this framework's syntax."""
        text = _value_text(value)
        add = next((p.add for p in self.parameters.values() if p.name == name), "")
        if self.style == "cli":
            flag = f"{self.flag_prefix}{name}"
            return flag if value is True else f"{flag} {text}"
        if self.style == "yaml":
            return f"{name}: {text}"
        if self.style == "toml":
            return f"{name} = {text}"
        return f"{add}{name}={text}"


def _is_pattern(name: str) -> bool:
    return any(c in name for c in "*?[")


def _value_text(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


@cache
def profiles() -> dict[str, Profile]:
    """Every framework's profile, by name (verl's concepts come from the metric registry)."""
    from logscope.metric_registry import load as load_registry

    folder = resources.files("logscope") / "data" / "frameworks"
    found: dict[str, Profile] = {}
    for name in FRAMEWORKS:
        data = tomllib.loads((folder / f"{name}.toml").read_text(encoding="utf-8"))
        if name == VERL or data.get("concepts_from") == VERL:  # verl's keys (a fork's too)
            registry = load_registry()
            data["concepts"] = {c: list(v) for c, v in registry.concepts.items()}
            data["watched"] = list(registry.loss_like_prefixes())
        found[name] = _profile(name, data)
    return found


def _profile(name: str, data: dict[str, Any]) -> Profile:
    prefixes = tuple(data.get("prefixes", [""]))
    concepts = {
        concept: tuple(p + n for n in names for p in prefixes)
        for concept, names in data.get("concepts", {}).items()
    }
    parameters = {key: Parameter(**value) for key, value in data.get("parameters", {}).items()}
    for verl_key, alias in VERL_ALIASES.items():  # the same verl parameter under another key
        if verl_key in parameters and alias not in parameters:
            parameters[alias] = parameters[verl_key]
    finite = {
        family: tuple(p + n for n in names for p in prefixes)
        for family, names in data.get("finite", {}).items()
    }
    watched = tuple(data.get("watched", [])) or tuple(n for names in finite.values() for n in names)
    return Profile(
        name=name,
        title=data["title"],
        source=data.get("source", ""),
        concepts=concepts,
        identify=tuple(p + n for n in data.get("identify", []) for p in prefixes),
        config_identify=tuple(data.get("config_identify", [])),
        known=tuple(p + n for n in data.get("known", []) for p in prefixes),
        style=data.get("style", "hydra"),
        flag_prefix=data.get("flag_prefix", "--"),
        parameters=parameters,
        step_keys=tuple(data.get("step_keys", [])),
        notes=dict(data.get("notes", {})),
        finite=finite,
        watched=watched,
        critic_prefixes=tuple(p + n for n in data.get("critic_prefixes", []) for p in prefixes),
        timing_prefixes=tuple(p + n for n in data.get("timing_prefixes", []) for p in prefixes),
    )


def get(name: str) -> Profile:
    """The profile called `name`; LogscopeError naming the known ones otherwise."""
    try:
        return profiles()[name]
    except KeyError:
        from logscope.exceptions import LogscopeError

        raise LogscopeError(
            f"unknown framework {name!r}; choose one of: {', '.join(FRAMEWORKS)}"
        ) from None


def profile_of(run: Run | None) -> Profile:
    """The profile of `run` (verl when none was assigned)."""
    name = run.meta.get("framework") if run is not None else None
    return profiles().get(name or VERL, profiles()[VERL])


def verl_equivalent(profile: Profile, key: str) -> str | None:
    """The verl metric `key` of `profile` stands for (through its concept), None if none."""
    concept = profile.concept_of(key)
    names = profiles()[VERL].names(concept) if concept else ()
    return names[0] if names else None


def unknown_metrics(run: Run) -> list[str]:
    """The run's metric keys logscope does not understand, sorted: for verl the metric
    registry's unknowns, for another framework the keys its profile does not map."""
    return list(_unknown(profile_of(run).name, tuple(run.metric_names)))


@functools.lru_cache(maxsize=64)
def _unknown(framework: str, names: tuple[str, ...]) -> tuple[str, ...]:
    # by the set of names: a fleet's runs mostly log the same keys (~1.5 ms per run saved)
    from logscope.metric_registry import unknown

    profile = profiles()[framework]
    if profile.is_verl:
        return tuple(unknown(names))
    return tuple(n for n in names if not profile.knows(n))


def detect(metric_names: Any) -> str:
    """The framework whose identifying keys a run has most of; verl on a tie, and unless
    another framework has at least `MIN_EVIDENCE` of them."""
    best, best_count = VERL, profiles()[VERL].evidence(metric_names)
    for name in FRAMEWORKS[1:]:
        count = profiles()[name].evidence(metric_names)
        if count >= MIN_EVIDENCE and count > best_count:
            best, best_count = name, count
    return best


_ABSENT = object()


def detect_config(config: dict[str, Any]) -> str | None:
    """The framework whose own config keys `config` has (`config_identify`), None if none."""
    for name in FRAMEWORKS[1:]:
        keys = profiles()[name].config_identify
        if keys and all(get_key(config, key, _ABSENT) is not _ABSENT for key in keys):
            return name
    return None


def assign(run: Run, forced: str | None = None) -> None:
    """Set `run.meta["framework"]`: `forced`, else what the reader set, else from the run's
    config, else detected from its keys."""
    if forced is not None:
        run.meta["framework"] = get(forced).name
    elif not run.meta.get("framework"):
        found = detect_config(run.config()) if run.config_segments else None
        run.meta["framework"] = found or detect(set(run.metric_names))
    if run.meta["framework"] != VERL:  # a verl release guessed from its keys says nothing here
        run.meta.pop("verl_version", None)


# ---- advice in the framework's own parameters ----------------------------------------------
#: a verl parameter in advice text, in backticks or bare (`data.max_response_length`)
_VERL_KEY = re.compile(
    r"(`?)\b((?:actor_rollout_ref|algorithm|data|trainer|critic|reward_model|async_training|"
    r"custom_reward_function)(?:\.[A-Za-z0-9_]+)+)\b(`?)"
)


def translate_text(text: str, profile: Profile) -> str:
    """`text` with each verl parameter replaced by the framework's own name, or marked as
    verl's where the framework has no counterpart."""
    if profile.is_verl:
        return text

    def swap(match: re.Match[str]) -> str:
        key = match.group(2)
        counterpart = profile.parameters.get(key)
        if counterpart is not None and counterpart.name:
            return f"`{counterpart.name}`"
        return f"verl's `{key}`"

    return _VERL_KEY.sub(swap, text)


def parameter_name(run: Run | None, verl_key: str) -> str:
    """What `run`'s framework calls the verl parameter `verl_key` (the verl key when it has no
    counterpart, or for verl)."""
    counterpart = profile_of(run).parameters.get(verl_key)
    return counterpart.name if counterpart is not None and counterpart.name else verl_key


def config_value(run: Run | None, name: str, step: int | None = None) -> Any:
    """A framework parameter's value in the run's own config (flat or dotted), None if absent."""
    if run is None or not run.config_segments:
        return None
    config = run.config(step)
    for key in (name, name.lstrip("-"), name.lstrip("-").replace("-", "_")):
        if key in config:
            return config[key]
    return run.config_value(name.lstrip("-"), step)
