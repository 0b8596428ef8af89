"""Runs in the store: name, source, steps, worst severity, last step time; add a run."""

import streamlit as st
from logscope.app import _common as ui

from logscope.exceptions import LogscopeError
from logscope.present import md_escape

ui.page_setup()
st.title("Runs")
root = ui.store_root()
st.caption(f"Store: {md_escape(root)}")

with st.expander("Add a run", expanded=not ui.list_run_ids()):
    path = st.text_input("Path to a log file or run folder (read only, never modified)")
    if folders := ui.allowed_dirs():
        st.caption("Only paths under " + ", ".join(md_escape(d) for d in folders) + " are read.")
    if st.button("Add path", disabled=not path):
        try:
            runs = ui.ingest(ui.check_path(path))
            st.success(f"Added {len(runs)} run(s) from {md_escape(path)}")
        except (LogscopeError, OSError, ui.Refused) as exc:
            st.error(md_escape(exc))
    upload = st.file_uploader("…or upload a verl log (saved into the store's uploads folder)")
    if upload is not None:
        try:
            saved = ui.save_upload(upload.name, upload.getvalue())
            runs = ui.ingest(saved)
            st.success(f"Added {len(runs)} run(s) from {md_escape(upload.name)}")
        except (LogscopeError, ui.Refused) as exc:
            st.error(md_escape(exc))

ids = ui.list_run_ids()
rows = [r for r in (ui.run_row(root, rid) for rid in ids) if r is not None]
if not rows:
    st.info("No runs yet. Add one above, or run `logscope dashboard LOG...`.")
else:
    st.dataframe(rows, hide_index=True, column_order=list(rows[0]))
    chosen = st.multiselect(
        "Runs to compare",
        ids,
        default=ui.selected_runs(ids),
        format_func=lambda rid: ui.label_of(root, rid),
    )
    st.session_state["selected_runs"] = chosen
    c1, c2 = st.columns(2)
    c1.page_link("pages/run.py", label="Open the current run", icon=":material/stethoscope:")
    c2.page_link(
        "pages/compare.py", label="Compare the selected runs", icon=":material/compare_arrows:"
    )
