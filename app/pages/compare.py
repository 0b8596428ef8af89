"""Two or more runs: overlaid curves, key-metric deltas, the config diff, the divergence step."""

import streamlit as st
from logscope.app import _common as ui

from logscope.charts import overlay_figure
from logscope.compare import KEY_METRICS, compare_runs
from logscope.present import DASH, fmt_number, md_escape

#: overlay charts per row
OVERLAY_COLUMNS = 2


def _cell(col: str, value: object) -> object:
    """A key-metric table cell as text: values and Δ by magnitude, % with one decimal."""
    if col == "metric":
        return value
    if col.startswith("% "):
        return f"{value:+.1f}%" if isinstance(value, int | float) else DASH
    return fmt_number(value, sign=col.startswith("Δ "))


ui.page_setup()
st.title("Compare")
root = ui.store_root()
ids = ui.list_run_ids()
chosen = st.sidebar.multiselect(
    "Runs (the first is the reference)",
    ids,
    default=ui.selected_runs(ids),
    format_func=lambda rid: ui.label_of(root, rid),
)
st.session_state["selected_runs"] = chosen
if len(chosen) < 2:
    st.info("Pick at least two runs in the sidebar (the first is the reference).")
else:
    runs = [ui.load_run(root, rid) for rid in chosen]
    runs = [r for r in runs if r is not None]
    labels = [ui.label_of(root, r.id) for r in runs]
    cmp = compare_runs(runs, labels=labels)
    st.caption("Runs: " + " · ".join(md_escape(lab) for lab in labels))

    st.subheader("Key metrics")
    st.caption(
        "Median over the last 20% of each run (validation: last value); Δ and % against the "
        "first run."
    )
    # Values as text formatted by magnitude (a column mixes lr ~1e-6 and tokens/s ~1e3).
    rows = [{col: _cell(col, v) for col, v in row.items()} for row in cmp.table_rows()]
    st.dataframe(rows, hide_index=True)

    st.subheader("Where the runs part")
    for d in cmp.divergence:
        st.text(d.sentence(ui.label_of(root, d.run_id)))

    smoothing = ui.smoothing_setting()
    metrics = []
    for km in KEY_METRICS:
        names = [km.find(r) for r in runs]
        name = next((n for n in names if n), None)
        if name and name not in metrics:
            metrics.append(name)
    div = cmp.divergence[0].metric if cmp.divergence else None
    # Two overlays a row: every key metric (reward and validation come last) fits a screen.
    for first in range(0, len(metrics), OVERLAY_COLUMNS):
        row = metrics[first : first + OVERLAY_COLUMNS]
        for col, name in zip(st.columns(OVERLAY_COLUMNS), row, strict=False):
            fig = overlay_figure(
                runs,
                name,
                labels=labels,
                smoothing=smoothing,
                divergence_step=cmp.first_divergence if name == div else None,
            )
            col.plotly_chart(fig, key=f"overlay-{name}")

    st.subheader("Config diff")
    if not all(cmp.config_known):
        st.caption("Some runs have no config dump; the diff needs every run's config.")
    elif not cmp.config_diff:
        st.caption("The configs are identical.")
    else:
        st.dataframe(
            [
                {"key": r.key, **{lab: str(v) for lab, v in zip(labels, r.values, strict=True)}}
                for r in cmp.config_diff
            ],
            hide_index=True,
        )
