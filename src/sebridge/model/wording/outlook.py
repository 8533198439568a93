"""What happens next to an event, in one wording for every sink, the page and the CLI.

A held approval is not a safe state: Azure starts the event at NotBefore
whether or not anyone approved it, drained or not. So every message about
a held event, and the reminder of an unanswered one, says when Azure starts
it anyway, which listed VMs are not ready and why, and the ways out; and the
first message of every event names the action and the rule that chose it.
Pure: each sink escapes these words its own way. See docs/ARCHITECTURE.md,
"What happens next".
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sebridge.kernel.text import visible
from sebridge.model import ScheduledEvent, Transition, TransitionKind
from sebridge.model.approval import ApprovalState
from sebridge.model.decision import NO_RULE
from sebridge.model.readiness import NOT_READY, VmReadiness, VmState

__all__ = [
    "Outlook",
    "anyway_command",
    "anyway_note",
    "approve_command",
    "approved_anyway",
    "approved_as",
    "approver",
    "decided",
    "decider",
    "not_ready",
    "outlook",
    "retry_command",
    "said_while_held",
    "starts_at",
    "tells_next",
    "until",
    "ways",
    "ways_out",
    "ways_out_of",
]


def until(moment: datetime | None, now: datetime) -> str:
    """ "in 14 min", "in 40 s", "3 min ago"; "" without a time."""
    if moment is None:
        return ""
    seconds = int((moment - now).total_seconds())
    span = abs(seconds)
    if span < 90:
        text = f"{span} s"
    elif span < 90 * 60:
        text = f"{round(span / 60)} min"
    elif span < 48 * 3600:
        text = f"{span // 3600} h {span % 3600 // 60:02d} min"
    else:
        text = f"{span // 86400} days"
    return f"in {text}" if seconds >= 0 else f"{text} ago"


def starts_at(event: ScheduledEvent, now: datetime) -> str:
    """When Azure starts the event by itself: "at 2024-05-04 08:14:07 UTC (in 12 min)"; the
    text IMDS sent when it is no time we can read."""
    if event.not_before is not None:
        at = event.not_before.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        return f"at {at} ({until(event.not_before, now)})"
    text = (event.not_before_text or "").strip()
    return f'at NotBefore, which IMDS sent as "{text}"' if text else "at a time IMDS did not say"


def _id(event_id: str) -> str:
    """The event id as `sebridge events` shows it (escaped: kernel/text.py), quoted for a
    shell when it must be, so the command can be pasted as it stands."""
    return shlex.quote(visible(event_id))


def approve_command(event_id: str) -> str:
    """ "sebridge approve ID": how to approve from a shell."""
    return f"sebridge approve {_id(event_id)}"


def retry_command(event_id: str) -> str:
    """ "sebridge hooks retry ID": run the failed prepare hooks again."""
    return f"sebridge hooks retry {_id(event_id)}"


def anyway_command(event_id: str) -> str:
    """ "sebridge approve ID --anyway": start it now, the VMs not ready."""
    return f"sebridge approve {_id(event_id)} --anyway"


def ways(
    event_id: str,
    *,
    held: bool = True,
    retry: bool = True,
    silent: Sequence[str] = (),
    approved: bool = True,
) -> tuple[tuple[str, str], ...]:
    """The ways out of an approval held by a failed prepare hook (retry them, or approve
    anyway), or waiting for unfinished ones (approve anyway): each command and what it
    does. `silent`: the VMs whose agent is silent (its coming back is a way out too);
    `retry`: whether a prepare hook failed (else `hooks retry` has nothing to run);
    approved=False: nobody approved the event yet (an approval would be held)."""
    anyway = (anyway_command(event_id), "starts it now, the VMs not ready")
    if not held:
        return (anyway,)
    after = "the approval goes" if approved else "it can be approved"
    out = [(_back(vm), f"it prepares its VM; {after} once every VM is ready") for vm in silent]
    if retry:
        what = f"runs the failed prepare hooks again; {after} once they succeed"
        out.insert(0, (retry_command(event_id), what))
    return (*out, anyway)


def _back(vm: str) -> str:
    """The way out of a silent agent: bring it back (`sebridge run` on its VM)."""
    return f"start sebridge's agent on {visible(vm)} again"


def _ways_line(commands: Sequence[tuple[str, str]]) -> str:
    return "Ways out: " + "; or ".join(f"{c} ({what})" for c, what in commands)


def ways_out(
    event_id: str, *, held: bool = True, retry: bool = True, silent: Sequence[str] = ()
) -> str:
    """The ways out in one sentence, for an answer to a person (`sebridge approve`, Slack's
    ephemeral, a `problem` note, the page): "Ways out: sebridge hooks retry ID (...); or
    sebridge approve ID --anyway (...)."."""
    return _ways_line(ways(event_id, held=held, retry=retry, silent=silent)) + "."


def ways_out_of(event_id: str, readiness: Sequence[VmReadiness], *, held: bool = True) -> str:
    """ways_out() for an approval whose listed VMs are as `readiness` says: a silent agent's
    coming back is a way out, and `hooks retry` only when a prepare hook failed."""
    return ways_out(event_id, held=held, **_ways_for(readiness))


def _ways_for(readiness: Sequence[VmReadiness]) -> dict[str, Any]:
    """ways()'s `retry` and `silent` for these VMs. `hooks retry` runs failed hooks: offered
    when one failed (or the readiness is not known), not for a hold by VMs nobody can
    drain (a silent agent, none at all)."""
    silent = [v.vm for v in readiness if v.state == VmState.AGENT_SILENT]
    cannot = silent or any(v.state == VmState.NO_AGENT for v in readiness)
    retry = any(v.state == VmState.FAILED for v in readiness) or not cannot
    return {"retry": retry, "silent": silent}


def anyway_note(actor: str, unready: str) -> str:
    """What an approval carried out anyway says (its `approved` transition's note): by whom,
    and which VMs were not ready and why."""
    return f"{_ANYWAY_BY}{actor}; not ready: {unready}"


_ANYWAY_BY = "approved anyway by "


def approved_anyway(actor: str | None, note: str | None) -> bool:
    """Whether an `approved` transition by `actor` with this note was carried out anyway
    (its note is anyway_note's)."""
    return bool(actor) and (note or "").startswith(f"{_ANYWAY_BY}{actor}; ")


def decider(
    actor: str | None,
    via: str | None,
    rule: str = "",
    *,
    anyway_by: str | None = None,
    anyway_via: str | None = None,
) -> str:
    """Who decided that an event goes, said once, for `events` and the page: "alice via
    slack"; an approval carried out anyway names who did it, "anyway", and the first
    approver, whose approval was held: "bob via cli, anyway (asked first: alice via
    slack)"."""
    first = approver(actor, via, rule)
    if anyway_by is None:
        return first
    by = approver(anyway_by, anyway_via or via)
    return f"{by}, anyway" if by == first else f"{by}, anyway (asked first: {first})"


def decided(action: str, rule: str) -> str:
    """The decision as the first message names it: 'ask: rule "business hours"',
    "ask: no rule matched"."""
    if not rule:
        return action
    if rule == NO_RULE:
        return f"{action}: {rule}"
    return f'{action}: rule "{rule}"'


def approver(actor: str | None, via: str | None, rule: str = "") -> str:
    """Who approved, said once: "alice via slack"; "carol (on-call) via approval link"
    (the page's actor is "approval link (NAME)"); "policy (rule "night freeze")". A
    transition that names nobody (one read from an older store) says "someone"."""
    actor = actor or "someone"
    if actor == "policy" or via == "policy":
        return f'policy (rule "{rule}")' if rule and rule != NO_RULE else "policy"
    if via in (None, "link") and actor.startswith("approval link"):
        name = actor.removeprefix("approval link").strip()
        if name.startswith("(") and name.endswith(")"):
            name = name[1:-1]
        return f"{name} via approval link" if name else "approval link"
    if not via or via == actor:
        return actor
    return f"{actor} via {via}"


def approved_as(actor: str | None, via: str | None, rule: str, note: str | None) -> tuple[str, str]:
    """An `approved` transition's who and note, the approver said once: ("by alice via
    slack", note); an approval anyway, whose note names its approver already: ("anyway by
    bob via cli", "Not ready: vm2: failed: drain exit 1")."""
    who = approver(actor, via, rule)
    note = note or ""
    prefix = f"{_ANYWAY_BY}{actor}; "
    if note.startswith(prefix):
        rest = note.removeprefix(prefix)
        return f"anyway by {who}", rest[:1].upper() + rest[1:]
    return f"by {who}", note


def not_ready(readiness: Sequence[VmReadiness]) -> tuple[VmReadiness, ...]:
    """The listed VMs not ready to be released: a prepare hook failed, runs, or has not
    started; its agent is silent; or no agent runs there to drain it (not waited for, but
    named in every message about the approval: nobody is released in silence)."""
    return tuple(v for v in readiness if v.state in NOT_READY or v.state == VmState.NO_AGENT)


@dataclass(frozen=True)
class Outlook:
    """What happens next, for people.

    Args:
        held: the approval is held (a prepare hook failed; nothing was sent to Azure), or
            nobody approved it and one would only be held (model/approval.py: would_hold).
        starts: "Azure starts it anyway at 2024-05-04 08:14:07 UTC (in 12 min), ready or
            not" ("" once it started or left IMDS).
        not_ready: one line per listed VM not ready, and why ("web1: failed: drain exit
            1: lb refused").
        ways_out: for a held event, the two commands that end the hold, each with what it
            does: ("sebridge hooks retry ID", "runs the failed prepare hooks again; ...");
            else empty.
        would_hold: held although nobody approved it (an approval would only be held): the
            failed hook's own message is the hold's first word, as loud as a `held` one.
    """

    held: bool
    starts: str
    not_ready: tuple[str, ...]
    ways_out: tuple[tuple[str, str], ...]
    would_hold: bool = False

    @property
    def unanswered_hold(self) -> str:
        """What a failed prepare hook's message adds when it makes an event nobody approved
        held ("" otherwise)."""
        if not self.would_hold:
            return ""
        return "Nobody approved it yet, and an approval would be held until a way out is taken"

    def lines(self) -> list[str]:
        """Everything, one sentence a line (the console joins them, the page lists them)."""
        out = [self.starts] if self.starts else []
        if self.not_ready:
            out.append("Not ready: " + "; ".join(self.not_ready))
        if self.ways_out:
            out.append(_ways_line(self.ways_out))
        return out


def outlook(
    event: ScheduledEvent,
    *,
    approval: str | None,
    readiness: Sequence[VmReadiness],
    now: datetime,
    over: bool = False,
    holding: bool = False,
) -> Outlook:
    """What happens next to `event`, whose approval is in state `approval` (None: nobody
    approved it) and whose listed VMs are as `readiness` says. over: it left IMDS.
    holding: readiness would hold an approval (model/approval.py: would_hold): an event
    nobody approved is then as held as one whose approval is."""
    would_hold = approval is None and holding
    held = approval == ApprovalState.HELD or would_hold
    live = not (over or event.started)
    starts = f"Azure starts it anyway {starts_at(event, now)}, ready or not" if live else ""
    lines = tuple(_vm_line(v) for v in not_ready(readiness))
    out = (
        ways(event.event_id, approved=not would_hold, **_ways_for(readiness))
        if held and live
        else ()
    )
    return Outlook(held, starts, lines, out, would_hold)


def tells_next(t: Transition, later: Outlook) -> bool:
    """Whether the message of `t` says what happens next (`later`): a hold, a reminder, and
    a prepare hook's final failure when nobody approved the event and an approval would
    only be held (the prepare lead): that failure is the hold's first word, as loud as a
    `held` transition. A failure that runs again by itself (`retries`) is not. The folded
    readiness message (READY: what mail and Teams hear instead of the hook steps) tells it
    when it says a VM is not ready and an approval would be held."""
    if t.kind in (TransitionKind.HELD, TransitionKind.REMINDER):
        return True
    if t.kind == TransitionKind.READY:
        return later.would_hold
    final = t.hook is None or t.hook.retry_at is None
    return t.kind == TransitionKind.HOOK_FAILED and later.would_hold and final


def said_while_held(t: Transition) -> bool:
    """Whether the event's approval was held when `t` was recorded: a `held` transition
    always; a reminder as the reminders worker recorded it (`while_held`)."""
    return t.kind == TransitionKind.HELD or t.while_held


def _vm_line(v: VmReadiness) -> str:
    """ "web1: failed: drain exit 1: lb refused" (the output's last line), "web2: waiting
    (drain not started)"."""
    line = v.line()
    tail = [s.strip() for s in v.output.splitlines() if s.strip()]
    return f"{line}: {tail[-1][:200]}" if v.state == VmState.FAILED and tail else line
