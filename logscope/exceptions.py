"""Errors logscope raises. The CLI maps every `LogscopeError` to a clear message and exit 2."""

from __future__ import annotations


class LogscopeError(Exception):
    """Base class: something logscope cannot do, explained for a user."""


class IngestError(LogscopeError):
    """An input cannot be read at all (wrong kind of file, nothing usable in it)."""

    def __init__(self, path: str, message: str, line: int | None = None) -> None:
        self.path = str(path)
        self.line = line
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")


class UnknownSource(IngestError):
    """The path is not any format logscope reads."""


class OptionalDependencyMissing(LogscopeError):
    """An extra (W&B, TensorBoard, Slack, dashboard) is needed but not installed."""

    def __init__(self, package: str, extra: str, purpose: str) -> None:
        self.package = package
        self.extra = extra
        super().__init__(
            f"{purpose} needs the '{package}' package, which is not installed. "
            f"Install it with: pip install 'logscope[{extra}]'"
        )


class BadDetectorParameters(LogscopeError):
    """A detector was configured with values it cannot work with."""


class NotEnoughSteps(LogscopeError):
    """A series is too short for a detector (detectors turn this into a skip reason)."""


class ConfigParseError(LogscopeError):
    """A launch command, override or YAML file cannot be parsed."""

    def __init__(self, message: str, token: str | None = None, path: str | None = None) -> None:
        self.token = token
        self.path = path
        prefix = f"{path}: " if path else ""
        suffix = f" (at {token!r})" if token is not None else ""
        super().__init__(f"{prefix}{message}{suffix}")
