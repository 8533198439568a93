"""The sentences a person reads, in one wording for every sink, the page and the CLI.

Each sink escapes them its own way. `outlook.py`: what happens next to an
event, who decided, the ways out of a hold; `hooks.py`: what a hook's
transitions say; `approvals.py`: what became of an approval, and why one was
refused. integrations/samples.py stays with the integrations: it holds sample
messages to check templates with, not wording. See docs/ARCHITECTURE.md, "What
happens next".
"""
