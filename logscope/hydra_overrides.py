"""Hydra command-line overrides: parse them, and apply them to verl's defaults.

Grammar covered (Hydra 1.3's override syntax, the part verl users write):
`key=value`, `+key=value` (add), `++key=value` (add or override), `~key` / `~key=value`
(delete), values: quoted strings, lists `[a,'b',1]`, dicts `{a:1}`, ints, floats (`1e-6`,
`inf`, `nan`), booleans (`true/false`, any case), `null`, and anything else as a string
(`${oc.select:…}` interpolations and unset `$VAR`s stay strings). Flags `--config-path`/`-cp`,
`--config-name`/`-cn`, `--config-dir`/`-cd` are recorded; a top-level `a,b` is a Hydra sweep and
is refused, as Hydra itself refuses it without `--multirun`.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from logscope import verl_config
from logscope.exceptions import ConfigParseError
from logscope.verl_config import delete_key, set_key

Op = Literal["set", "add", "force_add", "delete"]

_KEY = re.compile(r"[A-Za-z_$][\w\-$]*(?:[./][A-Za-z_$0-9][\w\-$]*)*(?:@[\w.\-]+)?")
_INT = re.compile(r"[+-]?(?:\d[\d_]*)")
_FLOAT = re.compile(r"[+-]?(?:(?:\d[\d_]*)?\.\d[\d_]*|\d[\d_]*\.?)(?:[eE][+-]?\d+)?")
_FLAGS_WITH_VALUE = {
    "--config-path": "config_path",
    "-cp": "config_path",
    "--config-name": "config_name",
    "-cn": "config_name",
    "--config-dir": "config_dir",
    "-cd": "config_dir",
    "--cfg": "cfg",
    "-c": "cfg",
    "--package": "package",
    "-p": "package",
    "--experimental-rerun": "rerun",
}
_FLAGS = {
    "--multirun",
    "-m",
    "--resolve",
    "--help",
    "-h",
    "--hydra-help",
    "--version",
    "--run",
    "-r",
    "--info",
    "-i",
    "--shell-completion",
    "-sc",
}


@dataclass(frozen=True)
class Override:
    """One parsed override: operation, dotted key, parsed value, and the text as given."""

    op: Op
    key: str
    value: Any
    raw: str
    value_text: str | None = None

    @property
    def prefix(self) -> str:
        return {"set": "", "add": "+", "force_add": "++", "delete": "~"}[self.op]


@dataclass
class HydraArgs:
    """What follows the verl entry on a command line."""

    overrides: list[Override] = field(default_factory=list)
    flags: dict[str, str] = field(default_factory=dict)  # config_path, config_name, …
    passthrough: list[str] = field(default_factory=list)  # unexpanded `$@`, `$EXTRA` words

    @property
    def config_path(self) -> str | None:
        return self.flags.get("config_path")

    @property
    def config_name(self) -> str | None:
        return self.flags.get("config_name")


def parse_args(args: list[str], path: str | None = None) -> HydraArgs:
    """Split a verl command's arguments into overrides and Hydra flags."""
    out = HydraArgs()
    i = 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("-") and not arg.startswith("~"):
            name, eq, value = arg.partition("=")
            if name in _FLAGS_WITH_VALUE:
                if not eq:
                    if i + 1 >= len(args):
                        raise ConfigParseError(f"Hydra flag {name} needs a value", arg, path)
                    value = args[i + 1]
                    i += 1
                out.flags[_FLAGS_WITH_VALUE[name]] = value
            elif name in _FLAGS:
                out.flags[name.lstrip("-")] = value or "true"
            else:
                raise ConfigParseError(
                    "unknown option for a Hydra app (expected key=value overrides)", arg, path
                )
        elif arg.startswith("$") and "=" not in arg:
            out.passthrough.append(arg)
        else:
            out.overrides.append(parse_override(arg, path))
        i += 1
    return out


def parse_override(token: str, path: str | None = None) -> Override:
    """Parse one override like `+actor_rollout_ref.rollout.n=8` or `~trainer.logger`."""
    text = token.strip()
    op: Op = "set"
    if text.startswith("++"):
        op, text = "force_add", text[2:]
    elif text.startswith("+"):
        op, text = "add", text[1:]
    elif text.startswith("~"):
        op, text = "delete", text[1:]
    key, eq, value_text = text.partition("=")
    key = key.strip()
    if not _KEY.fullmatch(key):
        what = "missing key" if not key else f"invalid key {key!r}"
        raise ConfigParseError(f"not a Hydra override ({what}; expected key=value)", token, path)
    if not eq:
        if op != "delete":
            raise ConfigParseError(
                "not a Hydra override (no '='; expected key=value, or ~key to delete)", token, path
            )
        return Override(op, key, None, token, None)
    return Override(op, key, parse_value(value_text, token, path), token, value_text)


def parse_value(text: str, token: str | None = None, path: str | None = None) -> Any:
    """A Hydra value: list, dict, quoted string, number, bool, null, or a plain string."""
    token = text if token is None else token
    parser = _ValueParser(text, token, path)
    items = parser.top()
    if len(items) > 1:
        raise ConfigParseError(
            "ambiguous value: Hydra reads a,b as a sweep. Use key=[a,b] for a list, "
            "or quote it for a string (key='a,b')",
            token,
            path,
        )
    return items[0]


class _ValueParser:
    def __init__(self, text: str, token: str, path: str | None) -> None:
        self.s = text
        self.i = 0
        self.token = token
        self.path = path

    def error(self, message: str) -> ConfigParseError:
        return ConfigParseError(message, self.token, self.path)

    def top(self) -> list[Any]:
        items = self.elements(end="")
        return items

    def elements(self, end: str) -> list[Any]:
        """Comma-separated elements up to `end` (`]`, `}` or end of text)."""
        items: list[Any] = []
        while True:
            items.append(self.element(end))
            self.skip_ws()
            if self.i >= len(self.s):
                if end:
                    raise self.error(f"unclosed {'[' if end == ']' else '{'} in value")
                return items
            c = self.s[self.i]
            if c == ",":
                self.i += 1
                continue
            if c == end:
                self.i += 1
                return items
            raise self.error(f"unexpected {c!r} in value")

    def skip_ws(self) -> None:
        while self.i < len(self.s) and self.s[self.i] in " \t":
            self.i += 1

    def element(self, end: str) -> Any:
        self.skip_ws()
        if self.i >= len(self.s):
            return "" if not end else None
        c = self.s[self.i]
        if c == "[":
            self.i += 1
            self.skip_ws()
            if self.i < len(self.s) and self.s[self.i] == "]":
                self.i += 1
                return []
            return self.elements("]")
        if c == "{":
            self.i += 1
            return self.mapping()
        if c in "'\"":
            return self.quoted()
        return self.primitive(end)

    def mapping(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        self.skip_ws()
        if self.i < len(self.s) and self.s[self.i] == "}":
            self.i += 1
            return out
        while True:
            self.skip_ws()
            m = re.compile(r"[\w\-.$]+").match(self.s, self.i)
            if not m:
                raise self.error("expected a key in {…}")
            key = m.group(0)
            self.i = m.end()
            self.skip_ws()
            if self.i >= len(self.s) or self.s[self.i] != ":":
                raise self.error("expected ':' after a key in {…}")
            self.i += 1
            out[key] = self.element("}")
            self.skip_ws()
            if self.i >= len(self.s):
                raise self.error("unclosed { in value")
            c = self.s[self.i]
            self.i += 1
            if c == "}":
                return out
            if c != ",":
                raise self.error(f"unexpected {c!r} in {{…}}")

    def quoted(self) -> str:
        quote = self.s[self.i]
        j = self.i + 1
        out: list[str] = []
        while j < len(self.s):
            c = self.s[j]
            if c == "\\" and j + 1 < len(self.s) and self.s[j + 1] in (quote, "\\"):
                out.append(self.s[j + 1])
                j += 2
                continue
            if c == quote:
                self.i = j + 1
                return "".join(out)
            out.append(c)
            j += 1
        raise self.error(f"unterminated {quote} quote in value")

    def primitive(self, end: str) -> Any:
        start = self.i
        depth = 0
        while self.i < len(self.s):
            c = self.s[self.i]
            if c == "$" and self.s.startswith("${", self.i):
                depth += 1
                self.i += 2
                continue
            if c in "([":
                depth += 1
            elif (c in ")]" and depth > 0) or (c == "}" and depth > 0):
                depth -= 1
            elif depth == 0 and (c == "," or (end and c == end)):
                break
            elif depth == 0 and c in "'\"" and self.i > start:
                pass  # quotes inside a plain string are literal
            self.i += 1
        if depth > 0:
            raise self.error("unbalanced brackets in value")
        return convert(self.s[start : self.i].strip())


def convert(text: str) -> Any:
    """Hydra's typing of an unquoted primitive."""
    low = text.lower()
    if low == "null":
        return None
    if low in ("true", "false"):
        return low == "true"
    if _INT.fullmatch(text):
        return int(text.replace("_", ""))
    if _FLOAT.fullmatch(text) and any(ch.isdigit() for ch in text):
        return float(text.replace("_", ""))
    if low in ("inf", "+inf", "-inf", "nan", "+nan", "-nan"):
        return float(low)
    return text


# ---- applying overrides ----------------------------------------------------------------------


def defaults_config(version: str | None = None) -> dict[str, Any]:
    """verl's defaults for the keys logscope reads, as a nested dict (for `version`)."""
    out: dict[str, Any] = {}
    for key in verl_config.DEFAULTS:
        set_key(out, key, verl_config.default_for(key, version))
    return out


def apply(config: dict[str, Any], overrides: list[Override]) -> dict[str, Any]:
    """A copy of `config` with `overrides` applied in order."""
    out = copy.deepcopy(config)
    for ov in overrides:
        key = ov.key.split("@", 1)[0]
        if "/" in key:
            continue  # a config-group choice (e.g. `actor_rollout_ref/rollout=…`): not a value
        if ov.op == "delete":
            delete_key(out, key)
        else:
            set_key(out, key, copy.deepcopy(ov.value))
    return out


def explicit_keys(config: dict[str, Any], prefix: str = "") -> set[str]:
    """Every leaf key of a nested config, dotted."""
    keys: set[str] = set()
    for k, v in config.items():
        dotted = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            keys |= explicit_keys(v, dotted + ".")
        else:
            keys.add(dotted)
    return keys


def from_dotted(config: dict[str, Any]) -> dict[str, Any]:
    """Expand `{'a.b': 1}` keys (as in a flat override YAML) into nested dicts."""
    out: dict[str, Any] = {}
    for k, v in config.items():
        v = from_dotted(v) if isinstance(v, dict) else v
        if isinstance(k, str) and "." in k:
            set_key(out, k, v)
        elif isinstance(out.get(k), dict) and isinstance(v, dict):
            out[k] = _merge(out[k], v)
        else:
            out[str(k)] = v
    return out


def _merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in top.items():
        out[k] = _merge(out[k], v) if isinstance(out.get(k), dict) and isinstance(v, dict) else v
    return out


def merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    """Deep merge: `top`'s values win, dicts merge."""
    return _merge(copy.deepcopy(base), copy.deepcopy(top))


_INTERP = re.compile(r"^\$\{(?:oc\.select:)?([A-Za-z_][\w.]*)(?:,(.*))?\}$")


def resolve_interpolations(
    config: dict[str, Any], root: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Resolve the simple absolute forms `${a.b}` and `${oc.select:a.b,default}` in place.

    Anything else (relative `${.x}`, resolvers, env) is left as written. Cycles stop at depth 10.
    """
    root = config if root is None else root

    def value_of(v: Any, depth: int) -> Any:
        if not isinstance(v, str) or depth > 10:
            return v
        m = _INTERP.match(v.strip())
        if not m:
            return v
        target = verl_config.get(root, m.group(1), _MISSING)
        if target is _MISSING:
            if m.group(2) is None:
                return v
            return convert(m.group(2).strip().strip("'\""))
        return value_of(target, depth + 1)

    for k, v in config.items():
        if isinstance(v, dict):
            resolve_interpolations(v, root)
        else:
            config[k] = value_of(v, 0)
    return config


_MISSING = object()
