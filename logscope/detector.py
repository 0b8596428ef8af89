"""The detector contract. Concrete detectors live in `logscope.detectors` (the detectors/ folder).

A detector is a small class with a stable `code` (e.g. LS201) and `name` slug (e.g. `kl-jump`),
the metric concepts it reads, its parameters declared once with their valid range (`param`), and
`detect(run) -> list[Finding]`. Its docstring is its catalogue entry with the sections in
`CATALOGUE_SECTIONS`, in that order.
"""

from __future__ import annotations

import dataclasses
import inspect
import numbers
from abc import ABC, abstractmethod
from typing import Any, ClassVar, TypeVar, dataclass_transform

from logscope.exceptions import BadDetectorParameters
from logscope.model import Finding, Run, Severity

CATALOGUE_SECTIONS: tuple[str, ...] = (
    "What it detects",
    "Why it matters",
    "Example",
    "Advice",
    "Known false positives",
    "References",
)


T = TypeVar("T", int, float)


@dataclasses.dataclass(frozen=True)
class Bounds:
    """The valid range of a parameter: `gt`/`ge` below, `lt`/`le` above (None: no bound)."""

    gt: float | None = None
    ge: float | None = None
    lt: float | None = None
    le: float | None = None

    def __contains__(self, value: float) -> bool:
        return (
            (self.gt is None or value > self.gt)
            and (self.ge is None or value >= self.ge)
            and (self.lt is None or value < self.lt)
            and (self.le is None or value <= self.le)
        )

    def describe(self, kind: type) -> str:
        """What a valid value is, in words: `an integer ≥ 3`, `a number > 0 and ≤ 1`."""
        limits = [
            f"{sign} {bound:g}"
            for sign, bound in ((">", self.gt), ("≥", self.ge), ("<", self.lt), ("≤", self.le))
            if bound is not None
        ]
        noun = "an integer" if kind is int else "a number"
        return " ".join([noun, " and ".join(limits)]) if limits else noun


def param(
    default: T,
    *,
    gt: float | None = None,
    ge: float | None = None,
    lt: float | None = None,
    le: float | None = None,
) -> T:
    """A detector parameter: its default and valid range (see `Detector`)."""
    return dataclasses.field(default=default, metadata={"bounds": Bounds(gt, ge, lt, le)})


#: the parameter types `param` knows, by annotation (annotations are strings under
#: `from __future__ import annotations`)
PARAM_KINDS: dict[object, type] = {"int": int, int: int, "float": float, float: float}


def check_param(detector: str, name: str, kind: type, bounds: Bounds, value: object) -> None:
    """BadDetectorParameters unless `value` is of `kind` (an int for int, any real number for
    float; a bool never) and within `bounds`."""
    number = numbers.Integral if kind is int else numbers.Real
    if isinstance(value, bool) or not isinstance(value, number) or value not in bounds:
        raise BadDetectorParameters(
            f"{detector}: {name} must be {bounds.describe(kind)}, got {value!r}"
        )


@dataclass_transform(kw_only_default=True, field_specifiers=(param,))
class Detector(ABC):
    """Base class for every diagnosis.

    The stable `code` and `name` slug go in the class header; `title`, `concepts`, `groups` and
    the rest are class attributes, written only where they differ from the defaults below.
    Parameters are declared once, as annotated class attributes with `param` (keyword-only,
    typed `int` or `float`, with their valid range):

        class KLJump(Detector, code="LS101", name="kl-jump"):
            title = "KL jumped"
            min_ratio: float = param(2.0, gt=1)
            window: int = param(15, ge=3)

    Every subclass is made a keyword-only dataclass, so `KLJump(window=21)` works, the signature
    lists the parameters (the catalogue shows it) and `params()` returns their current values.
    Construction checks each value against its declaration (`check_param`): a wrong type, a
    bool or a value out of range raises BadDetectorParameters naming the detector, parameter,
    value and valid range. A check across parameters goes in `__post_init__`, after
    `super().__post_init__()`. A class that writes its own `__init__` (and its subclasses) is
    left as written.
    """

    code: ClassVar[str]
    name: ClassVar[str]
    title: ClassVar[str]
    #: metric concepts (keys of `logscope.aliases.ALIASES`); the detector is skipped when
    #: none resolves in a run. Empty for detectors that read events or config only.
    concepts: ClassVar[tuple[str, ...]] = ()
    #: concepts that must all resolve besides (metric detectors read several together)
    requires: ClassVar[tuple[str, ...]] = ()
    #: "metrics" (per-step series), "events" (log text), or "config" (config segments)
    reads: ClassVar[str] = "metrics"
    default_severity: ClassVar[Severity] = "warning"
    groups: ClassVar[tuple[str, ...]] = ()
    #: set on an instance by project settings: every finding at this severity
    severity_override: ClassVar[Severity | None] = None

    def __init_subclass__(
        cls, *, code: str | None = None, name: str | None = None, **kwargs: Any
    ) -> None:
        super().__init_subclass__(**kwargs)
        if code is not None:
            cls.code = code
        if name is not None:
            cls.name = name
        init_owner = next(k for k in cls.__mro__ if "__init__" in vars(k))
        if init_owner is object or "__dataclass_fields__" in vars(init_owner):
            dataclasses.dataclass(cls, kw_only=True, repr=False, eq=False)
            for f in dataclasses.fields(cls):  # type: ignore[arg-type]
                if f.type not in PARAM_KINDS or "bounds" not in f.metadata:
                    raise TypeError(
                        f"{cls.__name__}.{f.name}: declare a parameter as "
                        "`name: int = param(default, ...)` (or float)"
                    )

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            check_param(
                self.name, f.name, PARAM_KINDS[f.type], f.metadata["bounds"], getattr(self, f.name)
            )

    def skip_reason(self, run: Run) -> str | None:
        """Why this detector cannot run on `run` (None when it can)."""
        from logscope.aliases import resolve  # on use: a cached report needs no registry
        from logscope.frameworks import profile_of

        profile = profile_of(run)
        if (
            self.reads == "metrics"
            and self.concepts
            and not any(resolve(run, c) for c in self.concepts)
        ):
            wanted = sorted({n for c in self.concepts for n in profile.names(c)})
            if not wanted:
                return f"{profile.title} logs none of the metrics it reads"
            return "none of its metrics is in the run (" + ", ".join(wanted) + ")"
        missing = [c for c in self.requires if self.reads == "metrics" and not resolve(run, c)]
        if missing:
            return "needs " + " and ".join(
                " or ".join(profile.names(c)) or f"{c} (not logged by {profile.title})"
                for c in missing
            )
        if self.reads == "config" and not run.config_segments:
            return "the run has no config"
        if self.reads == "config" and not profile.is_verl:
            return f"a rule for verl configs; this is a {profile.title} run"
        return None

    @abstractmethod
    def detect(self, run: Run) -> list[Finding]:
        """Findings on `run`. Never raises on short, NaN-padded or irregular series."""

    def finding(self, **fields: Any) -> Finding:
        """A Finding pre-filled with this detector's code, name, title and severity."""
        fields.setdefault("severity", self.default_severity)
        if self.severity_override is not None:
            fields["severity"] = self.severity_override
        fields.setdefault("title", self.title)
        return Finding(code=self.code, name=self.name, **fields)

    def params(self) -> dict[str, Any]:
        """The detector's keyword parameters and their current values."""
        sig = inspect.signature(type(self).__init__)
        return {p: getattr(self, p) for p in sig.parameters if p != "self" and hasattr(self, p)}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params().items())
        return f"{type(self).__name__}({args})"

    @classmethod
    def catalogue_entry(cls) -> dict[str, str]:
        """The docstring split into its catalogue sections."""
        return parse_sections(inspect.getdoc(cls) or "")


def parse_sections(doc: str) -> dict[str, str]:
    """Split a docstring into {section title: text}; the first paragraph is 'Summary'."""
    sections: dict[str, str] = {}
    current = "Summary"
    lines: list[str] = []
    for line in doc.splitlines():
        stripped = line.strip()
        if stripped.endswith(":") and stripped[:-1] in CATALOGUE_SECTIONS:
            sections[current] = "\n".join(lines).strip()
            current, lines = stripped[:-1], []
        else:
            lines.append(line)
    sections[current] = "\n".join(lines).strip()
    return sections
