"""The command line: argument parsing (main.py), one module per command family, and the
composition root that builds a daemon from a configuration (cli/runtime.py)."""
