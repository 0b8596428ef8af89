"""Project settings, as ruff has them: `[tool.logscope]` in `pyproject.toml`, or `logscope.toml`.

    [tool.logscope]                      # in logscope.toml: the same keys at the top level
    ignore = ["LS504", "seed-not-set"]   # codes, code prefixes (LS5) or names
    select = ["LS0", "LS2"]              # only these (default: every diagnosis)

    [tool.logscope.diagnoses.kl-jump]    # a code or a name
    min_ratio = 3.0                      # a declared parameter (`logscope rules kl-jump`)
    severity = "error"                   # every finding of this diagnosis at this severity

The file is found upward from the input (then upward from the working directory); in one
folder `logscope.toml` wins over `pyproject.toml`, and a `pyproject.toml` without
`[tool.logscope]` is passed over. `--config FILE` names the file instead. Every value is
checked when the file is read, through the detectors' declared parameters: a wrong one is an
error naming the file, the key and the valid range.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import difflib
import json
import tomllib
from collections.abc import Iterator, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from logscope.detector import PARAM_KINDS, Detector, check_param
from logscope.exceptions import BadDetectorParameters, LogscopeError
from logscope.model import SEVERITIES, Severity

FILE_NAMES = ("logscope.toml", "pyproject.toml")
_TOP_KEYS = ("select", "ignore", "diagnoses")


class SettingsError(LogscopeError):
    """A settings file that cannot be used; the message names the file and the key."""


@dataclasses.dataclass(frozen=True)
class Settings:
    """What a settings file says; `Settings()` is logscope's defaults."""

    path: Path | None = None
    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] = ()
    #: {detector code: {parameter: value}}
    params: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    #: {detector code: severity of its findings}
    severity: dict[str, Severity] = dataclasses.field(default_factory=dict)

    def detectors(
        self, only: Sequence[str] | None = None, skip: Sequence[str] | None = None
    ) -> list[Detector]:
        """The selected detectors, built with these parameters and severities.

        `only` (`--only`) replaces the file's `select`; `skip` (`--skip`) adds to its `ignore`.
        """
        from logscope.detectors.registry import detector_classes, matching

        chosen = list(detector_classes())
        wanted = list(only) if only else self.select
        if wanted:
            keep = {cls for selector in wanted for cls in matching(selector)}
            chosen = [c for c in chosen if c in keep]
        dropped = {cls for selector in [*self.ignore, *(skip or ())] for cls in matching(selector)}
        return [self.build(cls) for cls in chosen if cls not in dropped]

    def build(self, cls: type[Detector]) -> Detector:
        """One detector with this file's parameters and severity for it."""
        detector = cls(**self.params.get(cls.code, {}))
        if cls.code in self.severity:
            detector.severity_override = self.severity[cls.code]
        return detector

    def fingerprint(self) -> str:
        """What changes findings, as text (part of the cache key of cached findings)."""
        return json.dumps(
            [self.select, self.ignore, self.params, self.severity], sort_keys=True, default=str
        )


DEFAULT = Settings()


def load(path: str | Path) -> Settings:
    """The settings in `path` (a `logscope.toml`, or a `pyproject.toml`'s `[tool.logscope]`)."""
    file = Path(path)
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SettingsError(f"{file}: no such settings file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(f"{file}: cannot read it ({exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"{file}: not valid TOML ({exc})") from None
    if file.name == "pyproject.toml":
        table, where = data.get("tool", {}).get("logscope", {}), "tool.logscope"
    else:
        table, where = data, ""
    return _parse(table, file, where)


def find(start: str | Path) -> Path | None:
    """The settings file that applies to `start` (a file or folder): the nearest one upward."""
    here = Path(start).absolute()
    folder = here if here.is_dir() else here.parent
    for candidate in (folder, *folder.parents):
        for name in FILE_NAMES:
            file = candidate / name
            if file.is_file() and (name != "pyproject.toml" or _has_table(file)):
                return file
    return None


#: the file named with `--config` (set by `using`): it applies to every input
_EXPLICIT: contextvars.ContextVar[Path | None] = contextvars.ContextVar(
    "logscope_settings", default=None
)


@contextlib.contextmanager
def using(config: str | Path | None) -> Iterator[None]:
    """Within the block, `for_input` gives the settings of `config` (None: discover them).

    The file is read (and checked) on entry, so a bad `--config` fails before any work."""
    if config is None:
        yield
        return
    file = Path(config).absolute()
    _load_cached(file)
    token = _EXPLICIT.set(file)
    try:
        yield
    finally:
        _EXPLICIT.reset(token)


def explicit_file() -> Path | None:
    """The `--config` file `using` set for this block (None: settings are discovered)."""
    return _EXPLICIT.get()


def for_input(path: str | Path | None) -> Settings:
    """The settings for an input: the `--config` file (`using`) when one is named, else the
    file found upward from the input, else from the working directory, else the defaults."""
    explicit = _EXPLICIT.get()
    if explicit is not None:
        return _load_cached(explicit)
    file = (find(path) if path is not None else None) or find(Path.cwd())
    return _load_cached(file) if file is not None else DEFAULT


def _load_cached(file: Path) -> Settings:
    st = file.stat() if file.exists() else None
    return _load_at(file, (st.st_mtime_ns, st.st_size) if st else None)


@cache
def _load_at(file: Path, _stamp: tuple[int, int] | None) -> Settings:
    return load(file)


def _has_table(pyproject: Path) -> bool:
    try:
        return "logscope" in tomllib.loads(pyproject.read_text(encoding="utf-8")).get("tool", {})
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False  # not ours to judge: ruff, pip and others read it too


def _parse(table: dict[str, Any], file: Path, where: str) -> Settings:
    """Settings from the file's table; `where` is the table's dotted key (`tool.logscope`)."""
    from logscope.detectors.registry import find, matching

    def fail(message: str) -> SettingsError:
        return SettingsError(f"{file}: {message}")

    def dotted(*parts: str) -> str:
        return ".".join([where, *parts] if where else parts)

    unknown = sorted(set(table) - set(_TOP_KEYS))
    if unknown:
        raise fail(f"unknown setting {dotted(unknown[0])}{_did_you_mean(unknown[0], _TOP_KEYS)}")
    selectors: dict[str, tuple[str, ...] | None] = {"select": None, "ignore": None}
    for name in selectors:
        value = table.get(name)
        if value is None:
            continue
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise fail(f"{dotted(name)} must be a list of diagnosis codes or names")
        for selector in value:
            try:
                matching(selector)
            except LogscopeError as exc:
                raise fail(f"{dotted(name)}: {exc}") from None
        selectors[name] = tuple(value)
    diagnoses = table.get("diagnoses", {})
    if not isinstance(diagnoses, dict):
        raise fail(f"{dotted('diagnoses')} must be a table of diagnoses")
    params: dict[str, dict[str, Any]] = {}
    severity: dict[str, Severity] = {}
    seen: set[str] = set()
    for name, values in diagnoses.items():
        here = dotted("diagnoses", name)
        try:
            cls = find(name)
        except LogscopeError as exc:
            raise fail(f"{here}: {exc}") from None
        if not isinstance(values, dict):
            raise fail(f"{here} must be a table of parameters")
        if cls.code in seen:
            raise fail(f"{here}: {cls.code} ({cls.name}) is configured twice")
        seen.add(cls.code)
        fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        chosen: dict[str, Any] = {}
        for param, value in values.items():
            if param == "severity":
                if value not in SEVERITIES:
                    raise fail(
                        f"{here}.severity must be one of {', '.join(SEVERITIES)}, got {value!r}"
                    )
                severity[cls.code] = value
            elif param not in fields:
                known = ", ".join([*sorted(fields), "severity"])
                raise fail(
                    f"{here} has no parameter {param!r}{_did_you_mean(param, [*fields, 'severity'])}"
                    f" (it has: {known})"
                )
            else:
                f = fields[param]
                bounds, kind = f.metadata["bounds"], PARAM_KINDS[f.type]
                try:
                    check_param(cls.name, param, kind, bounds, value)
                except BadDetectorParameters:
                    raise fail(
                        f"{here}.{param} must be {bounds.describe(kind)}, got {value!r}"
                    ) from None
                chosen[param] = value
        try:
            cls(**chosen)  # checks across parameters (`__post_init__`)
        except BadDetectorParameters as exc:
            raise fail(f"{here}: {exc}") from None
        if chosen:
            params[cls.code] = chosen
    return Settings(
        path=file,
        select=selectors["select"],
        ignore=selectors["ignore"] or (),
        params=params,
        severity=severity,
    )


def _did_you_mean(word: str, choices: Sequence[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""
