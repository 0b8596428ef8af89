"""The resolved config: searchable, the config-lint (LS5xx) findings, restart segment diffs."""

import streamlit as st
from logscope.app import _cards as cards
from logscope.app import _common as ui

from logscope.compare import flatten, segment_diffs

picked = ui.run_page("Config")
if picked is not None:
    run_id, report = picked
    run = report.run
    if not run.config_segments:
        st.info("No config dump was found in this run's log (verl prints it at start-up).")
    else:
        segs = run.config_segments
        idx = 0
        if len(segs) > 1:
            idx = st.selectbox(
                "Config segment",
                range(len(segs)),
                index=len(segs) - 1,
                format_func=lambda i: f"#{i + 1} from step {segs[i].first_step}",
            )
        flat = flatten(segs[idx].config)
        query = st.text_input("Search keys and values", key="config_search")
        rows = [
            {"key": k, "value": str(v)}
            for k, v in flat.items()
            if not query or query.lower() in k.lower() or query.lower() in str(v).lower()
        ]
        st.caption(f"{len(rows)} of {len(flat)} keys")
        st.dataframe(rows, hide_index=True, height=min(600, 38 + 35 * max(1, len(rows))))
        with st.expander("As a tree"):
            st.json(segs[idx].config, expanded=1)

    st.subheader("Config checks")
    lint = cards.config_findings(report.findings)
    if not lint:
        st.success("No config findings.")
    cards.finding_cards(lint, run_id)

    diffs = segment_diffs(run)
    if diffs:
        st.subheader("Changes between restarts")
        for start, restart, diff in diffs:
            st.text(f"segment from step {start} → segment from step {restart}")
            if diff:
                st.dataframe(
                    [
                        {"key": r.key, "before": str(r.values[0]), "after": str(r.values[1])}
                        for r in diff
                    ],
                    hide_index=True,
                )
            else:
                st.caption("identical config")
