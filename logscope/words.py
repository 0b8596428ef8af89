"""Small helpers for the English in messages: a count with its noun in the right number."""

from __future__ import annotations


def plural(count: float, word: str, many: str | None = None) -> str:
    """`1 step`, `0 steps`, `3 logged steps`; `many` for irregular plurals (`mini-batches`).

    Only the last word of `word` takes the plural ending; counts print as given (`2.5 steps`),
    with thousands separators (`12,288 tokens`).
    """
    noun = word if count == 1 else many or word + "s"
    number = f"{count:,g}" if isinstance(count, float) else f"{count:,}"
    return f"{number} {noun}"
