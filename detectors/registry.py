"""The registry: every Detector subclass defined in a module of this package, by code.

Modules are discovered, so adding a detector means adding a class; nothing else to edit.
"""

from __future__ import annotations

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
    known = ", ".join(f"{c.code} ({c.name})" for c in detector_classes())
    raise LogscopeError(f"no diagnosis called {code_or_name!r}; known: {known}")


def select(only: list[str] | None = None, skip: list[str] | None = None) -> list[Detector]:
    """Detectors filtered by `--only`/`--skip` lists of codes or names."""
    chosen = list(detector_classes())
    if only:
        wanted = {find(x) for x in only}
        chosen = [c for c in chosen if c in wanted]
    if skip:
        dropped = {find(x) for x in skip}
        chosen = [c for c in chosen if c not in dropped]
    return [cls() for cls in chosen]
