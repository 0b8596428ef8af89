"""logscope dashboard: navigation only. Pages live in pages/ and call logscope functions.

Run with `logscope dashboard [LOG...]` (it sets LOGSCOPE_STORE and LOGSCOPE_RUNS, and for a
shared dashboard the token and allowed folders: see logscope.cli.dashboard).
"""

import streamlit as st
from logscope.app import _common as ui

st.set_page_config(page_title="logscope", page_icon=":material/troubleshoot:", layout="wide")
pages = [
    st.Page("pages/runs.py", title="Runs", icon=":material/folder_open:", default=True),
    st.Page("pages/fleet.py", title="Fleet", icon=":material/table_chart:"),
    st.Page("pages/run.py", title="Run", icon=":material/stethoscope:"),
    st.Page("pages/metrics.py", title="Metrics", icon=":material/show_chart:"),
    st.Page("pages/config.py", title="Config", icon=":material/settings:"),
    st.Page("pages/compare.py", title="Compare", icon=":material/compare_arrows:"),
    st.Page("pages/live.py", title="Live", icon=":material/sensors:"),
]
if not ui.authorized():
    # A shared dashboard without the token: every address shows the token form and no run
    # data (and keeps its page, so a deep link opens that page once the token is given).
    pages = [
        st.Page(ui.token_gate, title="Token required", url_path=p.url_path, default=n == 0)
        for n, p in enumerate(pages)
    ]
    st.navigation(pages, position="hidden").run()
else:
    st.navigation(pages).run()
