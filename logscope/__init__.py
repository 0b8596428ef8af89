"""logscope: find what went wrong in a verl RL run, where, and which parameter to change."""

__version__ = "0.1.0"
