"""The command line every generated-doc script shares: write the file, or `--check` it."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path


def main(
    render: Callable[[], str], default: Path, script: str, doc: str, argv: list[str] | None
) -> int:
    """Write `render()` to `--output` (default `default`); with `--check`, exit 1 if stale."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is stale")
    parser.add_argument("--output", type=Path, default=default, help=f"default: {default}")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.exists() else None
        if current != text:
            print(
                f"{args.output} is stale: run `python scripts/{script}` and commit it.",
                file=sys.stderr,
            )
            return 1
        print(f"{args.output} is up to date.")
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text, encoding="utf-8")
    print(f"wrote {args.output}")
    return 0
