"""What a hook's transitions say, in one wording for every sink (each escapes it its own way)."""

from __future__ import annotations

from sebridge.model import Transition, TransitionKind

__all__ = ["hook_news", "last_lines"]


def last_lines(output: str, *, lines: int = 3, limit: int = 300) -> str:
    """The tail of a hook's output people see in a message: its last few non-empty lines."""
    kept = [line.rstrip() for line in output.splitlines() if line.strip()][-lines:]
    text = " | ".join(kept)
    return text if len(text) <= limit else "…" + text[-(limit - 1) :]


def hook_news(t: Transition) -> str:
    """ "drain started on vm1", "drain succeeded on vm1 in 12 s",
    "drain failed (exit 1) on vm1: lb refused"; "" for other transitions."""
    run = t.hook
    if run is None:
        return ""
    name = run.hook if run.stage == "prepare" else f"{run.hook} ({run.stage})"
    if t.kind == TransitionKind.HOOK_STARTED:
        again = ""
        if run.attempt > 1:
            again = f" again (attempt {run.attempt}: a restart interrupted the run before)"
        return f"{name} started on {run.vm}{again}"
    took = ""
    if run.seconds is not None:
        took = f" in {run.seconds:.1f} s" if run.seconds < 10 else f" in {run.seconds:.0f} s"
    if t.kind == TransitionKind.HOOK_SUCCEEDED:
        return f"{name} succeeded on {run.vm}{took}"
    tail = last_lines(run.output)
    return f"{name} failed ({run.why}) on {run.vm}" + (f": {tail}" if tail else "")
