"""logscope's diagnoses (installed as `logscope.detectors`). See `registry` for the list."""
