"""Write docs/diagnoses.md from the detector registry; `--check` exits 1 when it is stale.

Usage:
    python scripts/gen_diagnoses.py           # regenerate
    python scripts/gen_diagnoses.py --check   # CI: fail when the committed file is stale
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from logscope.catalogue import render_markdown

DEFAULT = Path(__file__).resolve().parents[1] / "docs" / "diagnoses.md"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is stale")
    parser.add_argument("--output", type=Path, default=DEFAULT, help=f"default: {DEFAULT}")
    args = parser.parse_args(argv)
    text = render_markdown()
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.exists() else None
        if current != text:
            print(
                f"{args.output} is stale: run `python scripts/gen_diagnoses.py` and commit it.",
                file=sys.stderr,
            )
            return 1
        print(f"{args.output} is up to date.")
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text, encoding="utf-8")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
