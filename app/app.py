"""logscope dashboard: navigation only. Pages live in pages/ and call logscope functions.

Run with `logscope dashboard [LOG...]` (it sets LOGSCOPE_STORE and LOGSCOPE_RUNS).
"""

import streamlit as st

st.set_page_config(page_title="logscope", page_icon=":material/troubleshoot:", layout="wide")

pages = [
    st.Page("pages/runs.py", title="Runs", icon=":material/folder_open:", default=True),
    st.Page("pages/run.py", title="Run", icon=":material/stethoscope:"),
    st.Page("pages/metrics.py", title="Metrics", icon=":material/show_chart:"),
    st.Page("pages/config.py", title="Config", icon=":material/settings:"),
    st.Page("pages/compare.py", title="Compare", icon=":material/compare_arrows:"),
    st.Page("pages/live.py", title="Live", icon=":material/sensors:"),
]
st.navigation(pages).run()
