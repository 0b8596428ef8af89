"""logscope dashboard: navigation only. Pages live in pages/ and call logscope functions.

Run with `logscope dashboard [LOG...]` (it sets LOGSCOPE_STORE and LOGSCOPE_RUNS).
"""

import streamlit as st

st.set_page_config(page_title="logscope", page_icon="🔎", layout="wide")

pages = [
    st.Page("pages/runs.py", title="Runs", icon="🗂️", default=True),
    st.Page("pages/run.py", title="Run", icon="🩺"),
    st.Page("pages/metrics.py", title="Metrics", icon="📈"),
    st.Page("pages/config.py", title="Config", icon="⚙️"),
    st.Page("pages/compare.py", title="Compare", icon="⚖️"),
    st.Page("pages/live.py", title="Live", icon="📡"),
]
st.navigation(pages).run()
