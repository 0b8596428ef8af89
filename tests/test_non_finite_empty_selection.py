"""LS001 and the registry's NaN semantics: NaN `critic/values/*` is an empty batch unless a
divergence metric is not finite at the same step."""

from __future__ import annotations

from logscope.analyze import analyze_paths


def log(tmp_path, values_at: dict[int, str], vf_loss_at: dict[int, str]):
    lines = []
    for step in range(1, 21):
        lines.append(
            f"step:{step} - actor/pg_loss:0.01 - critic/vf_loss:{vf_loss_at.get(step, '0.05')} - "
            f"critic/values/mean:{values_at.get(step, '0.3')} - critic/score/mean:0.5\n"
        )
    path = tmp_path / "run.log"
    path.write_text("".join(lines))
    (report,) = analyze_paths([path], use_cache=False)
    return [f for f in report.findings if f.code == "LS001"]


def test_nan_values_with_finite_losses_are_an_empty_selection(tmp_path):
    assert log(tmp_path, {5: "nan", 6: "nan"}, {}) == []


def test_nan_values_with_a_nan_loss_at_the_step_are_a_divergence(tmp_path):
    (finding,) = log(tmp_path, {5: "nan", 6: "nan"}, {5: "nan"})
    metrics = finding.evidence["metrics"]
    assert set(metrics) == {"critic/values/mean", "critic/vf_loss"}
    assert metrics["critic/values/mean"]["count"] == 1  # step 6: the loss is finite there


def test_infinite_values_are_never_an_empty_selection(tmp_path):
    (finding,) = log(tmp_path, {5: "inf"}, {})
    assert finding.metric == "critic/values/mean"
