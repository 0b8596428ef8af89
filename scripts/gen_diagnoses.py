"""Write docs/diagnoses.md from the detector registry; `--check` exits 1 when it is stale.

Usage:
    python scripts/gen_diagnoses.py           # regenerate
    python scripts/gen_diagnoses.py --check   # CI: fail when the committed file is stale
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # scripts/_generated.py
import _generated

from logscope.catalogue import render_markdown

DEFAULT = Path(__file__).resolve().parents[1] / "docs" / "diagnoses.md"


def main(argv: list[str] | None = None) -> int:
    return _generated.main(render_markdown, DEFAULT, "gen_diagnoses.py", __doc__ or "", argv)


if __name__ == "__main__":
    sys.exit(main())
