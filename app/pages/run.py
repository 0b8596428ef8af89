"""One run: summary, incidents on a timeline, findings with evidence, advice and overrides."""

import streamlit as st
from logscope.app import _common as ui

from logscope.charts import incident_timeline
from logscope.present import md_escape, meta_rows

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

    if not report.findings:
        st.success("No findings: nothing at any severity.")
    else:
        all_ov = ui.overrides(report.findings)
        if all_ov:
            st.caption("Every suggested override of this run")
            st.code(" \\\n".join(all_ov), language="bash")
        if any(i.step is not None for i in report.incidents):
            st.plotly_chart(
                incident_timeline(report), key="timeline", config={"displayModeBar": False}
            )
        for inc in report.incidents:
            span = f"steps {inc.step}–{inc.end_step}" if inc.step is not None else "whole run"
            icon = ui.SEVERITY_ICON.get(inc.severity, "")
            st.markdown(f"#### {icon} Incident · {span}")
            st.text(f"{inc.title}\nfirst mover: {inc.first_mover}")
            for n, k in enumerate(inc.findings):
                ui.show_finding(report.findings[k], run_id, n)
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
