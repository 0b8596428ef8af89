"""Moved to `logscope.hydra_overrides`. Kept only until `logscope/ingest/console_parser.py`
imports `parse_override` from there; delete this file then."""

from logscope.hydra_overrides import parse_override

__all__ = ["parse_override"]
