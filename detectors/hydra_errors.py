"""Hydra / OmegaConf rejected a config key or an override."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any

from logscope.model import Advice, Finding, Run
from logscope.sources import cite, cite_all

from ._common import Hit, context, env_advice, quote, where, window
from ._crash_story import crash_story
from ._signatures import FRAME_RE, HYDRA_RE, SignatureDetector, phase_near

FULL_KEY_RE = re.compile(r"full_key: ([\w.\[\]-]+)")
OBJECT_TYPE_RE = re.compile(r"object_type=(\w+)")
APPEND_HINT_RE = re.compile(r"To append to your config use \+([\w.]+)=(\S+)")
HYDRA_DOC = "hydra:advanced/override_grammar/basic"

# (what the message says, how to read it) by the named group that matched first.
MEANINGS = {
    "override": "is not a key of the config: a typo, or a key this verl version does not have "
    "(`+key=value` adds a new key)",
    "key": "is not a key of the config: a typo, or a key this verl version does not have",
    "cls": "is not a field of {cls}, the dataclass verl builds this config section into: a "
    "typo, or a field this verl version does not have",
    "missing": "has no value (`???` in the config) and must be set",
    "append": "is already in the config: `+key=value` only adds new keys; use `key=value` "
    "(or `++key=value`) to change it",
    "delete": "is not in the config, so `~key` cannot delete it",
    "interp": "is referred to by an interpolation `${…}` but is not in the config",
    "value": "has a value of the wrong type",
    "token": "is part of an override Hydra cannot parse (its override grammar)",
}


def flat_keys(config: dict[str, Any], prefix: str = "") -> list[str]:
    """Every dotted key of a nested config dict (leaves and sections)."""
    out = []
    for key, value in config.items():
        dotted = f"{prefix}{key}"
        out.append(dotted)
        if isinstance(value, dict):
            out.extend(flat_keys(value, dotted + "."))
    return out


def closest_key(bad: str, known: list[str]) -> str | None:
    """The known key nearest to `bad`: among its siblings when `bad` is dotted, else by leaf."""
    if not known:
        return None
    if "." in bad:
        parent = bad.rsplit(".", 1)[0]
        siblings = [k for k in known if k.rsplit(".", 1)[0] == parent and k != bad]
        found = difflib.get_close_matches(bad, siblings, n=1, cutoff=0.8)
        if found:
            return found[0]
    leaf = bad.rsplit(".", 1)[-1]
    by_leaf: dict[str, str] = {}
    for k in known:
        by_leaf.setdefault(k.rsplit(".", 1)[-1], k)
    found = difflib.get_close_matches(leaf, [x for x in by_leaf if x != leaf], n=1, cutoff=0.8)
    return by_leaf[found[0]] if found else None


def override_for(run: Run, key: str) -> tuple[str, Any] | None:
    """(full key, value) of the run's Hydra override that names `key` (dotted, or its leaf)."""
    overrides = run.meta.get("overrides")
    if not isinstance(overrides, dict):
        return None
    for name, value in overrides.items():
        bare = str(name).lstrip("+~")
        if bare == key or bare.endswith("." + key):
            return bare, value
    return None


# Frames of the config libraries themselves (what raised, not what asked).
CONFIG_LIB_RE = re.compile(r"/(?:omegaconf|hydra)/")
# verl's training loop: a config error raised under it comes from code, after start-up.
TRAINING_FUNCS = ("fit",)


@dataclass(frozen=True)
class CodeAccess:
    """The program's own frame that set or read a key its config struct lacks."""

    func: str
    path: str
    source: str
    verb: str  # "set" / "read"
    whose: str  # "verl's" / "The program's"
    caller: str  # ", called from fit" or ""


def code_access(run: Run, hit: Hit, key: str) -> CodeAccess | None:
    """The innermost frame outside OmegaConf/Hydra near `hit` whose source line names `key`
    (`policy_loss_config["rollout_correction"] = …`): code, not an override, used the key."""
    lines = window(run, hit.line_no, 30, 30)
    texts = [x.text for x in lines]
    literal = re.compile(rf"""\[\s*['"]{re.escape(key)}['"]\s*\]|\.{re.escape(key)}\b""")
    frames = [(i, m) for i, t in enumerate(texts) if (m := FRAME_RE.match(t))]
    own = [(i, m) for i, m in frames if not CONFIG_LIB_RE.search(m.group("path"))]
    for i, m in reversed(own):
        source = texts[i + 1] if i + 1 < len(texts) else ""
        found = literal.search(source) if not FRAME_RE.match(source) else None
        if found is None:
            continue
        rest = source[found.end() :]
        verb = "set" if re.match(r"\s*=(?!=)", rest) else "read"
        path = m.group("path")
        short = path[path.rfind("/verl/") + 1 :] if "/verl/" in path else path.rsplit("/", 1)[-1]
        callers = [f.group("func") for _, f in own if f.group("func") in TRAINING_FUNCS]
        return CodeAccess(
            func=m.group("func"),
            path=short,
            source=source,
            verb=verb,
            whose="verl's" if "/verl/" in path else "The program's",
            caller=f", called from {callers[0]}" if callers else "",
        )
    return None


def _code_advice(key: str) -> Advice:
    return env_advice(
        "verl",
        "the config and the code of one verl release (then a release that fixes it)",
        f"The code set or read '{key}' on a struct config that has no such key. Use the trainer "
        "config of the same verl checkout as the code (not a YAML copied from another release); "
        "when they already match, it is a bug in that verl version: search verl's issues for "
        "the key, or move to a release that fixes it.",
        "verl:trainer/config/ppo_trainer.yaml",
    )


class HydraConfigError(SignatureDetector, code="LS024", name="hydra-config-error"):
    """Hydra or OmegaConf rejected a config key or a command-line override.

    What it detects:
        Hydra's `Could not override 'x'` (`Key 'y' is not in struct`), `Could not append to
        config. An item is already at 'x'`, `Could not delete from config`, override grammar
        errors (`mismatched input '…' expecting`, `LexerNoViableAltException`), and OmegaConf's
        `ConfigKeyError` / `ConfigAttributeError` (`Key 'x' not in 'HFModelConfig'`: a field
        verl's dataclass config does not have), `Missing mandatory value: x`, `Interpolation
        key 'x' not found` and `Value '…' could not be converted to Integer`. It names the bad
        key (with its full dotted path from `full_key:`, the append hint, or the run's own
        overrides) and, when the log holds the run's config dump, the closest existing key.
        Hydra's `Error executing job with overrides: […]` alone is not this diagnosis: Hydra
        prints it for any exception (run-crashed reports it). A `ConfigKeyError` raised under
        code that names the key itself (a traceback frame outside OmegaConf whose source line
        is `policy_loss_config["rollout_correction"] = …`, e.g. in verl's `fit`) is not a typo:
        the message says which code set or read the key its struct lacks (evidence
        `raised_by_code`, `code_frame`, `access`).

    Why it matters:
        The run stops before training, often after minutes of start-up (verl 0.6+ builds its
        dataclass configs inside the workers' `init_model`). A misspelt key is a one-character
        fix once it is named.

    Example:
        (TaskRunner pid=4098) omegaconf.errors.ConfigKeyError: Key 'enable_activation_offloading'
        not in 'HFModelConfig'
        (TaskRunner pid=4098)     full_key: enable_activation_offloading

    Advice:
        The closest key from the run's own config dump, with the override rewritten to it
        (suggested only when the log holds that dump: no key list is assumed). For an append
        error: drop the `+`. For a missing value: set it. For a grammar error: quote the whole
        override for the shell (`'key=[a,b]'`). A key set or read by code: the config and the
        code of one verl release, then a release that fixes the bug. Otherwise: check the key
        against this verl version's config (`python -m verl.trainer.main_ppo --cfg job` prints
        it).

    Known false positives:
        A config error raised and caught by custom code would still be reported.

    References:
        hydra:advanced/override_grammar/basic; omegaconf:usage#struct-flag (struct mode);
        omegaconf:structured_config; verl:trainer/config/ppo_trainer.yaml (the keys a verl
        release accepts).
    """

    title = "Hydra/OmegaConf rejected a config key"
    groups = ("config", "crash")

    def build(self, run: Run, hits: list[Hit]) -> Finding:
        first = hits[0]
        near = context(run, first.line_no, 0, 8)
        what, bad = self._bad_key(hits, near)
        full = self._full_key(run, bad, near)
        found = (m.group("cls") for h in hits for m in HYDRA_RE.finditer(h.text))
        cls = next((c for c in found if c), None)
        if cls is None and (m := OBJECT_TYPE_RE.search(near)) and m.group(1) != "dict":
            cls = m.group(1)
        known = flat_keys(run.config()) if run.config_segments else []
        closest = closest_key(full or bad, known) if bad and known else None
        value = self._value(run, full or bad, near)
        story = crash_story(run)
        final = story.crashed and story.in_final_error(first.line_no)
        phase = story.phase if final else phase_near(run, first.line_no, 60, 30)
        message = f"Hydra/OmegaConf rejected the config at {where(first)}"
        if phase:
            message += f", during {phase.label}"
        message += f": {quote(first.text, 160).rstrip('.')}."
        code = code_access(run, first, bad) if what in ("key", "cls") and bad else None
        shown = full if full and full != bad else bad
        if code is not None:
            message += (
                f" {code.whose} code {code.verb} '{shown}' (`{quote(code.source, 100)}` in "
                f"{code.func}, {code.path}{code.caller}), a key its config struct does not "
                "have: not a typo in an override, but a config and code from different verl "
                "versions (a YAML of another release) or a bug in that code."
            )
        elif bad:
            meaning = MEANINGS[what].format(cls=cls or "its class")
            message += f" '{shown}' {meaning}."
        if closest and code is None:
            message += f" The closest key in this run's config is '{closest}'."
        evidence = {
            "error": what,
            "key": bad,
            "full_key": full,
            "config_class": cls,
            "closest_key": closest,
            "phase": phase.id if phase else None,
            "raised_by_code": code is not None,
        }
        if code is not None:
            evidence.update(code_frame=f"{code.func} ({code.path})", access=code.verb)
            advice = [_code_advice(shown or bad)]
        else:
            advice = self._advice(what, full or bad, value, closest)
        return self.signature_finding(
            hits, message, evidence=evidence, advice=advice, references=cite_all([HYDRA_DOC])
        )

    @staticmethod
    def _bad_key(hits: list[Hit], near: str) -> tuple[str, str | None]:
        """(which error, the key it names) from the first hit that names one."""
        full = FULL_KEY_RE.search(near)
        matches = (m for hit in hits for m in HYDRA_RE.finditer(hit.text))
        for m in matches:
            if m.group("cls"):
                return "cls", m.group("key")
            for group in ("override", "key", "missing", "append", "delete", "interp"):
                if m.group(group):
                    return group, m.group(group)
            for group in ("value", "token"):
                if m.group(group) is not None:
                    return group, full.group(1) if full else None
        return "key", full.group(1) if full else None

    @staticmethod
    def _full_key(run: Run, bad: str | None, near: str) -> str | None:
        """The dotted path of the bad key: the append hint, `full_key:`, or the run's override."""
        if not bad:
            return None
        m = APPEND_HINT_RE.search(near)
        if m and m.group(1).endswith(bad):
            return m.group(1)
        m = FULL_KEY_RE.search(near)
        if m and "." in m.group(1) and m.group(1).endswith(bad):
            return m.group(1)
        found = override_for(run, bad)
        return found[0] if found else (bad if "." in bad else None)

    @staticmethod
    def _value(run: Run, key: str | None, near: str) -> Any:
        """The value the run gave the bad key: its override, or Hydra's append hint."""
        if not key:
            return None
        given = override_for(run, key)
        if given is not None:
            return given[1]
        m = APPEND_HINT_RE.search(near)
        return m.group(2) if m and m.group(1).endswith(key) else None

    @staticmethod
    def _advice(what: str, key: str | None, value: Any, closest: str | None) -> list[Advice]:
        if what == "token":
            return [
                env_advice(
                    "hydra-override",
                    "quote the whole override for the shell, e.g. 'key=[a,b]' or 'key=\"a b\"'",
                    "Hydra could not parse an override: brackets, spaces, commas and `=` inside a "
                    "value must reach Hydra inside one shell argument.",
                    HYDRA_DOC,
                )
            ]
        if closest:
            override = f"{closest}={value}" if value is not None else None
            why = f"'{key}' is not in the config; '{closest}' is, and is probably what was meant."
            return [Advice(closest, None, value, override, why, cite(HYDRA_DOC))]
        if what == "append" and key:
            override = f"{key}={value}" if value is not None else None
            why = "The key exists already: override it without the leading `+` (or with `++`)."
            return [Advice(key, None, value, override, why, cite(HYDRA_DOC))]
        if what == "missing" and key:
            why = "A mandatory value (`???`) that nothing set: give it on the command line."
            return [Advice(key, None, None, None, why, cite(HYDRA_DOC))]
        why = (
            "Check the key's spelling and section against this verl version's config "
            "(`python -m verl.trainer.main_ppo --cfg job` prints it); keys and dataclass "
            "fields change between verl versions."
        )
        if key is None:
            return [env_advice("hydra-override", None, why, HYDRA_DOC)]
        return [Advice(key, None, None, None, why, cite(HYDRA_DOC))]
