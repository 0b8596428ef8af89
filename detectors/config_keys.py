"""Config keys and value types checked against verl's own config tree (LS517, LS518).

Only what the user typed is judged (the overrides of a launch command, the keys of a YAML file),
and only by the `check` command: a log's config dump comes from a verl release or fork whose keys
logscope may not know. The tree is the one of the release chosen with `--verl-version` (the
newest in `logscope/data/verl_schema.json` by default), see `logscope.verl_schema`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any, ClassVar

from logscope import hydra_overrides, verl_config, verl_schema, verl_version
from logscope.config_view import ConfigView, Hit
from logscope.exceptions import ConfigParseError
from logscope.model import Advice, Finding, Run
from logscope.verl_schema import KeyTree, UnknownKey

from .config_lint import PREFLIGHT_KINDS, ConfigRule

HYDRA_GRAMMAR = "https://hydra.cc/docs/advanced/override_grammar/basic/"
VERL_TRAINERS = ("verl.trainer.main_ppo",)


@dataclass(frozen=True)
class Typed:
    """One key the user set: from a command token (`op` set/delete) or a YAML file (`yaml`)."""

    key: str
    value: Any
    op: str
    token: str | None = None  # the command-line token as typed
    value_text: str | None = None
    inside: str | None = None  # the token's own key when `key` is a path inside its dict value


def _release_url(release: str) -> str:
    return f"https://pypi.org/project/verl/{release}/"


def _config_file(tree: KeyTree) -> str:
    name = tree.trainer
    old = verl_version.older_than(tree.version, "0.5")
    return f"verl/trainer/config/{name if old else '_generated_' + name}.yaml"


# ---- what the user typed, and against which tree ------------------------------------------------


def typed_keys(run: Run) -> tuple[list[Typed], set[str]]:
    """(keys the user set, keys added with `+`/`++`) of a command or YAML run."""
    command = run.meta.get("command")
    if command:
        return _from_command(command["args"])
    explicit = run.meta.get("explicit_keys") or []
    config = run.config()
    return [Typed(k, verl_config.get(config, k), "yaml") for k in explicit], set()


def _from_command(args: list[str]) -> tuple[list[Typed], set[str]]:
    try:
        overrides = hydra_overrides.parse_args(args).overrides
    except ConfigParseError:
        return [], set()  # the command's own report says what is wrong with it
    typed: list[Typed] = []
    added: set[str] = set()
    for ov in overrides:
        key = ov.key
        if "$" in key or "/" in key or "@" in key or key.split(".")[0] == "hydra":
            continue  # a shell variable, a group path or package, Hydra's own config
        if ov.op in ("add", "force_add"):
            added.add(key)
            continue
        typed.append(Typed(key, ov.value, ov.op, ov.raw, ov.value_text))
        if ov.op == "set" and isinstance(ov.value, dict):
            typed += [
                Typed(f"{key}.{sub}", value, "set", ov.raw, ov.value_text, inside=key)
                for sub, value in _leaves(ov.value)
            ]
    return typed, added


def _leaves(value: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    out = []
    for k, v in value.items():
        if isinstance(v, dict) and v:
            out += _leaves(v, f"{prefix}{k}.")
        else:
            out.append((f"{prefix}{k}", v))
    return out


def _under(key: str, prefixes: set[str]) -> bool:
    return any(key == p or key.startswith(p + ".") for p in prefixes)


def key_tree(run: Run) -> tuple[KeyTree | None, str | None]:
    """(the tree the run's keys are judged against, or None with the reason)."""
    version = run.meta.get("verl_version")
    if run.source.kind == "verl-yaml":
        strategy = verl_config.get(run.config(), "actor_rollout_ref.actor.strategy")
        trainer = "ppo_megatron_trainer" if strategy == "megatron" else verl_schema.DEFAULT_TRAINER
        return verl_schema.tree(version, trainer), None
    entry = str(run.meta.get("entry") or "")
    module = entry.replace("\\", "/").removesuffix(".py").replace("/", ".")
    if not any(module == e or module.endswith("." + e) for e in VERL_TRAINERS):
        return None, f"{entry} has its own config (a recipe adds keys to verl's), not checked"
    name = (run.meta.get("hydra_flags") or {}).get("config_name")
    trainer = PurePosixPath(name).stem if name else verl_schema.DEFAULT_TRAINER
    local = run.meta.get("config_file_keys")
    if trainer in verl_schema.trainers():
        tree = verl_schema.tree(version, trainer)
    elif local is not None:
        base = "ppo_megatron_trainer" if "megatron" in trainer else verl_schema.DEFAULT_TRAINER
        tree = verl_schema.tree(version, base)
    else:
        return None, f"--config-name {name} is neither a verl trainer config nor a local file"
    tree, reason = _with_group_choices(tree, _group_choices(run, tree), version)
    if tree is not None and local:
        tree = tree.extended({k: "any" for k in local if not tree.has(k)})
    return tree, reason


def _group_choices(run: Run, tree: KeyTree) -> dict[str, str]:
    """{config group: option} chosen on the command line (`model_engine=megatron`)."""
    command = run.meta.get("command") or {}
    try:
        overrides = hydra_overrides.parse_args(command.get("args") or []).overrides
    except ConfigParseError:
        return {}
    return {
        ov.key.split("@")[0]: str(ov.value)
        for ov in overrides
        if ov.op != "delete"
        and "." not in ov.key.split("@")[0]
        and ov.key.split("@")[0] in tree.groups
    }


def _with_group_choices(
    tree: KeyTree, chosen: dict[str, str], version: str | None
) -> tuple[KeyTree | None, str | None]:
    """The tree for the chosen config-group options; None when logscope has no flattened config
    for them (another engine, another rollout config …)."""
    options = dict(tree.groups) | chosen
    for group, option in chosen.items():
        default = tree.groups[group]
        for other, value in options.items():
            default = default.replace("${" + other + "}", value)
        if option == default:
            continue
        picked = (
            verl_schema.trainer_for_choice(f"{group}={option}")
            if verl_schema.selects_trainer(group)
            else None
        )
        if picked is None or not verl_schema.tree(version, picked).types:
            return None, (
                f"{group}={option}: logscope has no flattened verl {tree.version} config for this "
                "choice, so its keys are not checked"
            )
        tree = verl_schema.tree(version, picked)
    return tree, None


# ---- LS517 -----------------------------------------------------------------------------------


class _TypedKeysRule(ConfigRule):
    """Shared plumbing: judged on a command or YAML only, never on a log's config dump."""

    needs_trainer_config: ClassVar[bool] = True

    def skip_reason(self, run: Run) -> str | None:
        if run.source.kind not in PREFLIGHT_KINDS:
            return None  # detect() returns nothing on a log: not worth a line in every report
        tree, reason = key_tree(run)
        if tree is None and self.needs_trainer_config:
            return reason
        return super().skip_reason(run)

    def check(self, v: ConfigView) -> list[Hit]:
        return []  # judged per run in detect(): it needs the typed keys, not one config view

    def tree_for(self, run: Run) -> KeyTree | None:
        if run.source.kind not in PREFLIGHT_KINDS or not run.config_segments:
            return None
        tree, _ = key_tree(run)
        if tree is None and not self.needs_trainer_config:
            return verl_schema.tree(run.meta.get("verl_version"))
        return tree


class UnknownConfigKey(_TypedKeysRule, code="LS517", name="unknown-config-key"):
    """A key the user set is not in verl's config for the chosen verl version.

    What it detects:
        Every key of a launch command's overrides (and of a YAML config) checked against the key
        tree of verl's trainer config (`ppo_trainer`, or `ppo_megatron_trainer` … with
        `--config-name`), taken from the verl wheel of the release chosen with `--verl-version`
        (default: the newest known). Suggestions are real keys of that release: each misspelled
        component corrected against its siblings (difflib), the key under another section, or
        the key it was renamed to between releases. A key that exists in other releases says
        which. `+key=value` and `++key=value` (Hydra adds) are never judged; a key below a
        free-content value (`{}` or null, e.g. `actor_rollout_ref.model.override_config`) is
        fine in a YAML file and needs `+` on a command line. Commands of a recipe's own main
        (`recipe.dapo.main_dapo` …) are not judged: their configs add keys.

    Why it matters:
        Hydra refuses a key that is not in the config (`Could not override '…'. To append to
        your config use +…`), so the job does not even start; in a YAML file an unknown key is
        silently ignored, or rejected by verl's dataclass configs (0.6 and later) when the
        workers start.

    Example:
        actor_rollout_ref.actor.ppo_mirco_batch_size_per_gpu=8
          → error: unknown key (not in verl 0.9.1's config) — did you mean
            actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu?
        actor_rollout_ref.rollout.foo_bar=3
          → error, no suggestion: +actor_rollout_ref.rollout.foo_bar=3 adds a new key.

    Advice:
        The token rewritten with the corrected key (`evidence.replaces` names the key it
        replaces, so `--fix` corrects the spelling in place), when one suggestion is clearly the
        best; `+key=value` for a new key below a free-content value. Pass `--verl-version` when
        the key exists in the release you run.

    Known false positives:
        A verl fork or an unreleased verl with keys the wheels on PyPI do not have; a custom
        `--config-path` config that logscope cannot read.

    References:
        Hydra override grammar: https://hydra.cc/docs/advanced/override_grammar/basic/;
        verl's trainer configs: `verl/trainer/config/_generated_ppo_trainer.yaml` in each verl
        wheel (https://pypi.org/project/verl/).
    """

    title = "Config key not in verl's config"
    default_severity = "error"

    def detect(self, run: Run) -> list[Finding]:
        tree = self.tree_for(run)
        if tree is None:
            return []
        typed, added = typed_keys(run)
        yaml = run.source.kind == "verl-yaml"
        findings: list[Finding] = []
        reported: set[str] = set()
        for item in typed:
            if _under(item.key, added) or (item.token or item.key) in reported:
                continue
            if item.inside and tree.types.get(item.inside) in ("null", "any"):
                continue  # a null value is replaced wholesale: its new content is free
            if item.key.split("@")[0] in tree.groups:
                continue  # a config-group choice (`model_engine=megatron`), not a key
            judged = verl_schema.unknown_keys(
                [item.key], tree, allow_open=yaml or item.op == "delete"
            )
            if judged:
                reported.add(item.token or item.key)
                findings.append(self._finding(item, judged[0], tree, yaml))
        return findings

    def _finding(self, item: Typed, hit: UnknownKey, tree: KeyTree, yaml: bool) -> Finding:
        release = tree.version
        trainer = "" if tree.trainer == verl_schema.DEFAULT_TRAINER else f" {tree.trainer}"
        where = f"not in verl {release}'s{trainer} config"
        if hit.elsewhere:
            where += (
                f"; verl {verl_schema.format_ranges(list(hit.elsewhere))} {_have(hit.elsewhere)} it"
            )
        subject = f"unknown key {item.key}"
        if item.inside:
            subject += f" in the value of {item.inside}"
        evidence: dict[str, Any] = {
            "key": item.key,
            "verl_version": release,
            "trainer": tree.trainer,
        }
        if hit.suggestions:
            evidence["suggestions"] = list(hit.suggestions)
        if hit.elsewhere:
            evidence["in_releases"] = verl_schema.format_ranges(list(hit.elsewhere))
        advice: list[Advice] = []
        severity = "error"
        if hit.status == "open":
            add = f"+{item.inside or item.key}={item.value_text}"
            message = (
                f"{subject} ({where}): {hit.open_parent} holds free content, and Hydra adds a "
                f"key there only with + — write {add}"
            )
            advice.append(self._advice(item, add, f"Hydra adds a new key only with +: {add}."))
            evidence["replaces"] = item.inside or item.key
        else:
            message = f"{subject} ({where})"
            if hit.suggestions:
                message += " — did you mean " + _or(hit.suggestions) + "?"
            elif not yaml and item.op == "set":
                message += f"; Hydra refuses it. To add a new key: +{item.key}={item.value_text}"
            if hit.elsewhere and all(
                verl_schema.release_index(first) > verl_schema.release_index(release)
                for first, _ in hit.elsewhere
            ):
                message += f" (pass --verl-version if you run a newer verl than {release})"
            if hit.fix and not item.inside:
                override = self._corrected(item, hit.fix)
                advice.append(
                    self._advice(
                        item,
                        override,
                        f"{item.key} is not a key of verl {release}'s config; {hit.fix} is the "
                        "closest real key.",
                        hit.fix,
                    )
                )
                evidence["replaces"] = item.key
            if yaml and not hit.suggestions and not tree.is_dataclass_section(item.key):
                severity = "warning"  # a config file may add keys; verl just ignores this one
        if severity == "warning":
            message += (
                ": a config file may add keys, but verl ignores this one unless your code reads it"
            )
        return self.finding(
            severity=severity,
            message=message,
            evidence=evidence,
            advice=advice,
            references=[HYDRA_GRAMMAR, f"{_release_url(release)} ({_config_file(tree)})"],
        )

    @staticmethod
    def _corrected(item: Typed, key: str) -> str:
        if item.op == "delete":
            return f"~{key}"
        if item.value_text is not None:
            return f"{key}={item.value_text}"
        return verl_config.override(key, item.value)

    @staticmethod
    def _advice(item: Typed, override: str, rationale: str, parameter: str | None = None) -> Advice:
        return Advice(
            parameter=parameter or item.key,
            current=None,
            suggested=item.value,
            override=override,
            rationale=rationale,
            source=HYDRA_GRAMMAR,
        )


def _have(ranges: tuple[tuple[str, str], ...]) -> str:
    return "has" if len(ranges) == 1 and ranges[0][0] == ranges[0][1] else "have"


def _or(names: tuple[str, ...]) -> str:
    if len(names) == 1:
        return names[0]
    return ", ".join(names[:-1]) + " or " + names[-1]


# ---- LS518 -----------------------------------------------------------------------------------


class ConfigValueType(_TypedKeysRule, code="LS518", name="config-value-type"):
    """A value that cannot have the type verl's config gives the key (a word for a number).

    What it detects:
        A value the user set that is a plain word where verl's config for the chosen release
        has an int or float (`data.train_batch_size=abc`), or a word other than true/false where
        it has a bool. Interpolations (`${oc.env:BS}`, `${data.x}`), unexpanded shell variables
        (`$BS`) and numbers in quotes are not judged. Keys verl leaves untyped (default null)
        are not judged either.

    Why it matters:
        Hydra passes the word through as a string: verl fails with a `TypeError` deep in the
        trainer after the workers started, or, for a bool, reads any non-empty string as true.

    Example:
        data.train_batch_size=abc
          → error: verl 0.9.1's config has an int there, and 'abc' is not a number.

    Advice:
        Set a number (or true/false); no value is suggested, since only the user knows it.

    Known false positives:
        A custom resolver or a preprocessing step of the user's own that turns the word into a
        number before verl reads it.

    References:
        verl's trainer configs: `verl/trainer/config/_generated_ppo_trainer.yaml` in each verl
        wheel (https://pypi.org/project/verl/); Hydra override grammar:
        https://hydra.cc/docs/advanced/override_grammar/basic/.
    """

    title = "Config value of the wrong type"
    default_severity = "error"
    needs_trainer_config: ClassVar[bool] = False  # a recipe's config keeps verl's types

    def detect(self, run: Run) -> list[Finding]:
        tree = self.tree_for(run)
        if tree is None:
            return []
        typed, added = typed_keys(run)
        findings: list[Finding] = []
        for item in typed:
            if item.op == "delete" or _under(item.key, added):
                continue
            expected = verl_schema.value_type_error(item.key, item.value, tree)
            if expected is None:
                continue
            what = "true or false" if expected == "bool" else "a number"
            article = "an" if expected == "int" else "a"
            findings.append(
                self.finding(
                    message=(
                        f"{item.key}={item.value}: verl {tree.version}'s config has "
                        f"{article} {expected} there, and "
                        f"{item.value!r} is not {what}."
                    ),
                    evidence={
                        "key": item.key,
                        "value": item.value,
                        "expected": expected,
                        "verl_version": tree.version,
                    },
                    references=[f"{_release_url(tree.version)} ({_config_file(tree)})"],
                )
            )
        return findings
