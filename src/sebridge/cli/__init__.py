"""The command line: argument parsing (main.py), one module per command family, and the
composition root: the daemon's parts (cli/assembly.py), the daemon and the runner from a
configuration (cli/runtime.py), what `run` serves (cli/serving.py)."""
