"""One-line evidence: scalars whole, long nested values summarised, short ones whole."""

from __future__ import annotations

from logscope.present import EVIDENCE_VALUE_CHARS, evidence_text


def test_long_nested_evidence_is_summarised_and_short_values_stay_whole() -> None:
    metrics = {f"actor/metric_{i}": {"first_step": i, "count": 1} for i in range(6)}
    text = evidence_text(
        {
            "first_step": 59,
            "ratio": 0.123456789,
            "last": None,
            "families": ["loss", "kl"],
            "metrics": metrics,
            "steps": list(range(40)),
            "note": "x" * 200,
        }
    )
    assert text.startswith("first_step=59, ratio=0.123457, last=unknown, ")
    assert "families=['loss', 'kl']" in text  # short: as it is
    assert "metrics={6 entries: actor/metric_0, actor/metric_1, " in text and "…}" in text
    assert "first_step': 0" not in text
    assert "steps=[40 items: 0, 1, 2," in text
    assert "x" * 200 in text  # a long string is a value, not a structure: kept whole
    for part in text.split(", metrics=")[1:]:
        assert len(part.split("}")[0]) <= EVIDENCE_VALUE_CHARS
