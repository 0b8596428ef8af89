"""`python -m logscope` runs the command line."""

from logscope.cli.main import main

main()
