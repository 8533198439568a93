"""The configuration: one TOML file read once at start into frozen dataclasses, every
problem named by its key. loader.py is the entry point; see docs/ARCHITECTURE.md, "Config"."""
