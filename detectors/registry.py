"""The registry: every Detector subclass defined in a module of this package, by code.

Modules are discovered, so adding a detector means adding a class; nothing else to edit.
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
from functools import cache

from logscope.detector import Detector
from logscope.exceptions import LogscopeError

_SKIP_MODULES = {"registry"}


@cache
def detector_classes() -> tuple[type[Detector], ...]:
    """Every concrete detector class, sorted by code."""
    import logscope.detectors as package

    found: dict[str, type[Detector]] = {}
    for info in pkgutil.iter_modules(package.__path__):
        if info.name in _SKIP_MODULES or info.name.startswith(("_", "test")):
            continue
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for obj in vars(module).values():
            if (
                isinstance(obj, type)
                and issubclass(obj, Detector)
                and obj.__module__ == module.__name__
                and getattr(obj, "code", None)
            ):
                if obj.code in found and found[obj.code] is not obj:
                    raise RuntimeError(f"duplicate detector code {obj.code}")
                found[obj.code] = obj
    return tuple(found[c] for c in sorted(found))


def all_detectors() -> list[Detector]:
    """One instance of every detector, with default parameters."""
    return [cls() for cls in detector_classes()]


def find(code_or_name: str) -> type[Detector]:
    """A detector class by code (`LS201`) or name (`kl-jump`), case-insensitive."""
    wanted = code_or_name.strip().lower()
    for cls in detector_classes():
        if cls.code.lower() == wanted or cls.name == wanted:
            return cls
    shown = {n.lower(): n for c in detector_classes() for n in (c.code, c.name)}
    close = difflib.get_close_matches(wanted, list(shown), n=1, cutoff=0.6)
    hint = f"did you mean {shown[close[0]]!r}? " if close else ""
    known = ", ".join(f"{c.code} ({c.name})" for c in detector_classes())
    raise LogscopeError(f"no diagnosis called {code_or_name!r}; {hint}known: {known}")


def matching(selector: str) -> list[type[Detector]]:
    """The detectors a selector names: a code (`LS201`), a code prefix (`LS2`: every LS2xx)
    or a name (`kl-jump`), case-insensitive."""
    wanted = selector.strip().upper()
    if wanted.startswith("LS") and wanted[2:].isdigit() and len(wanted) < 5:
        found = [c for c in detector_classes() if c.code.upper().startswith(wanted)]
        if found:
            return found
    return [find(selector)]


def select(only: list[str] | None = None, skip: list[str] | None = None) -> list[Detector]:
    """Detectors with default settings, filtered by `--only`/`--skip` selectors (`matching`)."""
    from logscope.settings import DEFAULT

    return DEFAULT.detectors(only, skip)
