"""What a hook's transitions say, in one wording for every sink (each escapes it its own way)."""

from __future__ import annotations

from datetime import datetime

from sebridge.model import AGAIN_RESTART, AGAIN_RETRY, HookRun, Transition, TransitionKind

__all__ = ["hook_news", "last_lines"]


def last_lines(output: str, *, lines: int = 3, limit: int = 300) -> str:
    """The tail of a hook's output people see in a message: its last few non-empty lines."""
    kept = [line.rstrip() for line in output.splitlines() if line.strip()][-lines:]
    text = " | ".join(kept)
    return text if len(text) <= limit else "…" + text[-(limit - 1) :]


def hook_news(t: Transition) -> str:
    """ "drain started on vm1", "drain succeeded on vm1 in 12 s",
    "drain failed (exit 1) on vm1: lb refused; runs again at 08:12:03 UTC (attempt 2 of 3)",
    "hooks retry requested by alice: drain on vm1 runs again"; "" for other transitions."""
    if t.kind == TransitionKind.HOOKS_RETRY:
        return t.note
    run = t.hook
    if run is None:
        return ""
    name = run.hook if run.stage == "prepare" else f"{run.hook} ({run.stage})"
    if t.kind == TransitionKind.HOOK_STARTED:
        return f"{name} started on {run.vm}{_again(run)}"
    took = ""
    if run.seconds is not None:
        took = f" in {run.seconds:.1f} s" if run.seconds < 10 else f" in {run.seconds:.0f} s"
    if t.kind == TransitionKind.HOOK_SUCCEEDED:
        return f"{name} succeeded on {run.vm}{took}"
    tail = last_lines(run.output)
    failed = f"{name} failed ({run.why}) on {run.vm}" + (f": {tail}" if tail else "")
    return failed + _next_try(run)


def _of(run: HookRun, retry: int) -> str:
    return f"attempt {retry + 1} of {run.retries + 1}"


def _again(run: HookRun) -> str:
    """Why a run is not the first, and which try of the hook's retries it is."""
    of = f" ({_of(run, run.retry)})" if run.retries else ""
    if run.again == AGAIN_RETRY:
        return f" again{of}"
    if run.again and run.again != AGAIN_RESTART:  # "asked by X": `sebridge hooks retry`
        return f" again (hooks retry {run.again}){of}"
    if run.again == AGAIN_RESTART or run.attempt > 1:  # (before retries, only a restart)
        return f" again (attempt {run.attempt}: a restart interrupted the run before)"
    return of


def _next_try(run: HookRun) -> str:
    """What comes after a failed prepare hook with retries: another try (when), or none."""
    if run.retry_at is not None:
        at = datetime.fromisoformat(run.retry_at)  # as the store wrote it (store/codec.py)
        return f"; runs again at {at:%H:%M:%S} UTC ({_of(run, run.retry + 1)})"
    if not run.retries or run.stage != "prepare":
        return ""
    if run.retry >= run.retries:
        return f"; no retries left ({_of(run, run.retry)})"
    return f"; no time for another try before NotBefore ({_of(run, run.retry)})"
