"""The optional C tokenizer of the console reader (logscope/ingest/_items.c); everything else
is configured in pyproject.toml. Without a C compiler the install goes on without it and the
reader uses its polars path (same results, slower)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("logscope.ingest._items", ["logscope/ingest/_items.c"], optional=True),
    ]
)
