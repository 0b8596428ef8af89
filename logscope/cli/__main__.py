"""`python -m logscope.cli` runs the command line."""

from logscope.cli.main import main

main()
