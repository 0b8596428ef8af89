"""One run: summary, incidents on a timeline with their finding cards, then a Config section
with the config findings (LS5xx: facts about the config, not events in training)."""

import streamlit as st
from logscope.app import _cards as cards
from logscope.app import _common as ui

from logscope.charts import incident_timeline
from logscope.present import NOTHING_READ, md_code, md_escape, meta_rows, step_span

picked = ui.run_page("Run")
if picked is not None:
    run_id, report = picked
    run = report.run
    s = run.summary()
    st.subheader(md_escape(ui.run_label(run)))
    st.text(f"{s['source']['kind']}: {s['source']['path']}")
    c = st.columns(5)
    c[0].metric("steps", s["steps"]["count"])
    c[1].metric("last step", s["steps"]["last"] if s["steps"]["last"] is not None else "–")
    c[2].metric("metrics", s["metrics_count"])
    c[3].metric("findings", len(report.findings))
    c[4].metric("worst", report.worst_severity or "none")
    st.text("  ".join(f"{label}: {value}" for label, value in meta_rows(run.meta)))

    if report.nothing_read:
        st.warning(NOTHING_READ)
    elif not report.findings:
        st.success("No findings: nothing at any severity.")
    else:
        all_ov = ui.overrides(report.findings)
        if all_ov:
            st.caption("Every suggested override of this run")
            st.code(" \\\n".join(all_ov), language="bash")
        if any(i.step is not None for i in report.timed_incidents()):
            st.plotly_chart(
                incident_timeline(report), key="timeline", config={"displayModeBar": False}
            )
        n = 0
        for inc, events, linked in cards.split_incidents(report.findings, report.incidents):
            span = step_span(inc.step, inc.end_step)
            span = span.replace("step ", "steps ", 1) if "–" in span else span
            icon = ui.SEVERITY_ICON.get(inc.severity, "")
            st.markdown(f"#### {icon} Incident · {span or 'whole run'}")
            st.text(f"{inc.title}\nfirst mover: {inc.first_mover}")
            if linked:
                named = ", ".join(
                    f"{md_code(report.findings[k].code)} {md_escape(report.findings[k].name)}"
                    f" ({step_span(report.findings[k].step, None) or 'run'})"
                    for k in linked
                )
                st.caption(f"With config finding(s) {named}: cards in the Config section below.")
            n = cards.finding_cards((report.findings[k] for k in events), run_id, n)
        config = cards.config_findings(report.findings)
        if config:
            st.subheader(f"Config ({len(config)})", anchor="config")
            st.caption("What the config checks (LS5xx) found in the run's config.")
            cards.finding_cards(config, run_id, n)
            st.page_link("pages/config.py", label="Open the config", icon=":material/settings:")
    for err in report.errors:
        st.error(md_escape(err))
    if report.skipped:
        with st.expander(f"Not applicable here ({len(report.skipped)})"):
            st.dataframe(
                [{"code": x.code, "name": x.name, "reason": x.reason} for x in report.skipped],
                hide_index=True,
            )
    ps = run.parse_stats
    with st.expander(f"Parse stats: {ps.lines_read:,} lines, {ps.skipped_lines:,} skipped"):
        st.json(ps.to_dict())
    if run.events:
        with st.expander(f"Events ({len(run.events)})"):
            st.dataframe(
                [
                    {"line": e.line_no, "step": e.step_hint, "kind": e.kind, "text": e.text}
                    for e in run.events[:2000]
                ],
                hide_index=True,
            )
