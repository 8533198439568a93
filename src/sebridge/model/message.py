"""The sink protocol: one attempt per call; a receipt, or a retryable/permanent error.

Retries and backoff are not a sink's business: the dispatcher owns them, and
the outbox's unique (transition, sink) rows mean one delivery per pair. What
only the sink can tell is whether an attempt cut short (an answer lost, the
process killed before the ack) landed anyway: `Message.maybe_sent` says one
may have, and a sink that can look (Slack, a JSON-lines file) looks first.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Protocol

from sebridge.kernel.text import clip, displayable, map_text
from sebridge.model import Receipt, Transition, TransitionKind
from sebridge.model.approval import ApprovalState, Blocker, anyway_offered, blocker, would_hold
from sebridge.model.decision import offers_anyway, offers_approval
from sebridge.model.readiness import VmReadiness
from sebridge.model.wording.outlook import Outlook, approved_anyway, decided, outlook

__all__ = ["Message", "Sink", "shown", "shown_field"]

# IMDS text in a chat message, card or ticket is cut to these (after escaping), so no
# field can push a message past its API's limits: names and ids are short, a
# description is prose (each template cuts it again to its API's limit), notes and
# hook output are ours or tails already.
FIELD_LIMIT = 300
DESCRIPTION_LIMIT = 10_000
OTHER_LIMIT = 2_000

# What a transition says of the event's approval, for a message built without the store's
# word on it (a sample, a redraw): the approval it announces.
_ANNOUNCES: dict[str, str] = {
    TransitionKind.APPROVED: ApprovalState.POSTED,
    TransitionKind.WOULD_APPROVE: ApprovalState.DRY_RUN,
    TransitionKind.PROBLEM: ApprovalState.FAILED,
    TransitionKind.HELD: ApprovalState.HELD,
}
# Transitions that announce an approval carried out (or, dry run, that would have been).
_APPROVING = (TransitionKind.APPROVED, TransitionKind.WOULD_APPROVE)
# Transitions that say the event left IMDS.
_ENDS = (TransitionKind.COMPLETED, TransitionKind.CANCELLED)


@dataclass(frozen=True)
class Message:
    """What a sink is asked to say, once.

    Args:
        vm_name: this VM, so a sink can mark it among Resources.
        policy: what the policy decided for the event: approve, ask (a person decides),
            inform (announced, no approval offered) or ignore (never delivered).
        receipt: what this sink returned for an earlier transition of the
            same event (update that message or ticket instead of a new one).
        dry_run: sebridge runs with policy.dry_run: nothing reaches IMDS.
        approved_by: who approved the event, if anyone has by the time of delivery
            (carried out: posted, or dry run).
        approval_state: the state of the event's approval at delivery (ApprovalState),
            whatever became of it; None when it has none.
        attempt: earlier attempts at this same delivery that reached the sink
            (0 on the first), counted as begun in the store before each send, so
            one cut short by a crash (kill -9, power loss) counts too.
        approve_url: the event's signed approval link while it can be approved
            and approval links are configured; else None.
        page_url: the same link for a message about a held event (`leads_to_page`), whose
            page offers the ways out and Approve anyway instead of Approve; else None.
        transition_id: the transition's id in the store (0 when not from the
            store): a key a sink may write, to find what an earlier attempt left.
        readiness: each listed VM's readiness as of delivery, when the event's rule
            names prepare hooks (empty otherwise).
        prepare: the prepare hooks the event's rule names (dry run: "would have run").
        begun_elsewhere: the latest earlier attempt was begun by another agent (it died
            and this one took its delivery over): what it left on its own host (a
            console, a JSON lines file) cannot be looked at from here.
        rule: the name of the rule that chose `policy` (the first message names both).
        on_prepare_failure: the rule's "hold" or "approve": whether a failed prepare hook
            (or a silent agent) in `readiness` would hold an approval.
        approved_by_id: the channel's own id of `approved_by` (a Slack member id: Slack
            says it as a mention); None elsewhere.
        approved_anyway: the approval `approved_by` names was carried out anyway (approve
            anyway: despite VMs not ready), a fact every channel says.
        event_state: the event's lifecycle state at delivery (the store's: "" when not
            known): a recover hook's step after "completed" finds it completed.
    """

    transition: Transition
    vm_name: str
    policy: str
    receipt: Receipt | None = None
    dry_run: bool = False
    approved_by: str | None = None
    approval_state: str | None = None
    attempt: int = 0
    approve_url: str | None = None
    page_url: str | None = None
    transition_id: int = 0
    readiness: tuple[VmReadiness, ...] = ()
    prepare: tuple[str, ...] = ()
    begun_elsewhere: bool = False
    rule: str = ""
    on_prepare_failure: str = "hold"
    approved_by_id: str | None = None
    approved_anyway: bool = False
    event_state: str = ""

    @property
    def decider(self) -> tuple[str | None, str | None, bool]:
        """Who approved, as of this message: (name, channel id, anyway). An approval's own
        transition names its approver (and says, in its note, that it was anyway); any
        later one, who approved as the store said at delivery."""
        t = self.transition
        if t.kind in _APPROVING and t.actor:
            return t.actor, t.actor_id, approved_anyway(t.actor, t.note)
        return self.approved_by, self.approved_by_id, self.approved_anyway

    @property
    def ended(self) -> str:
        """ "completed" or "cancelled" once the event ended (this transition says so, or the
        store did at delivery: a recover hook's step comes after the end); else "". The
        end stays the last word on the event's state, whatever note follows it."""
        kind = self.transition.kind
        if kind in _ENDS:
            return str(kind)
        return self.event_state if self.event_state in _ENDS else ""

    @property
    def maybe_sent(self) -> bool:
        """An earlier attempt may have landed (its answer lost, or the process died
        before recording it): a sink that can check looks before sending again."""
        return self.attempt > 0

    @property
    def approvable(self) -> bool:
        """Whether a person is offered an approval (a button, a link, a Jira status): the
        policy offers one (not for "inform") and one would be carried out now, as of this
        transition and the approval at delivery (model/approval.py: blocker(); an event
        whose approval waits for hooks or is held offers none; nor does one the policy
        approves itself: model/decision.py, offers_approval)."""
        return offers_approval(self.policy) and self._blocker is None

    @property
    def anyway(self) -> bool:
        """Whether "Approve anyway" is offered instead (model/approval.py: anyway_offered): the
        policy offers approvals and the event's approval waits for or is held by its prepare
        hooks, or nobody approved it and one would only be held. Never together with
        approvable."""
        t = self.transition
        return offers_anyway(self.policy) and anyway_offered(
            approval=self.approval,
            present=not self.ended,
            started=t.event.started,
            holding=self.holding,
        )

    @property
    def holding(self) -> bool:
        """Readiness as of delivery would hold an approval (model/approval.py: would_hold):
        a listed VM's prepare hook failed for good, or its agent is silent, and the rule
        holds; for a policy that offers approvals (an "inform" event asks nobody)."""
        return would_hold(self.readiness, self.on_prepare_failure, self.policy)

    @property
    def _blocker(self) -> Blocker | None:
        t = self.transition
        return blocker(
            approval=self.approval,
            present=not self.ended,
            started=t.event.started,
            holding=self.holding,
        )

    @property
    def leads_to_page(self) -> bool:
        """Whether this message carries the approval page's link instead of an Approve: it
        is about a held event (the hold, its reminders, any message while held; a reminder
        while the prepare hooks run) and the page offers the ways out and Approve anyway. A
        phone user need not scroll back to the first card or mail."""
        kind = self.transition.kind
        about = self.held or kind in (TransitionKind.HELD, TransitionKind.REMINDER)
        return about and self.anyway and not self.approvable

    @property
    def approval(self) -> str | None:
        """The event's approval's state as this message knows it: the store's at delivery;
        else what approved_by or the transition announce (a reminder recorded while the
        approval was held: held; not one recorded while nobody approved and readiness
        would hold an approval, which `holding` says still)."""
        if self.approval_state is not None:
            return self.approval_state
        if self.approved_by is not None:
            return ApprovalState.POSTED
        t = self.transition
        if t.kind == TransitionKind.REMINDER and t.while_held and not self.holding:
            return ApprovalState.HELD
        return _ANNOUNCES.get(t.kind)

    @property
    def held(self) -> bool:
        """The event's approval is held (a prepare hook failed, nothing was sent to Azure), or
        nobody approved it and one would only be held: as loud as a hold (a prepare hook
        that failed at the prepare lead, before anyone approved)."""
        return self.approval == ApprovalState.HELD or self._blocker == Blocker.WOULD_HOLD

    @property
    def decided(self) -> str:
        """The action and the rule that chose it: 'ask: rule "business hours"'."""
        return decided(self.policy, self.rule)

    def outlook(self, now: datetime) -> Outlook:
        """What happens next (model/wording/outlook.py): when Azure starts it anyway, which VMs
        are not ready, and, held, the ways out."""
        t = self.transition
        return outlook(
            t.event,
            approval=self.approval,
            readiness=self.readiness,
            now=now,
            over=bool(self.ended),
            holding=self._blocker == Blocker.WOULD_HOLD,
        )


class Sink(Protocol):
    """A place people hear about events. It has no name of its own: the dispatcher knows
    it by its integration's name (the outbox key), so the two cannot differ."""

    def send(self, message: Message) -> Receipt | None:
        """Deliver once. Raises RetryableDeliveryError or PermanentDeliveryError."""
        ...

    def close(self) -> None:
        """Release connections and files."""
        ...


def shown(message: Message) -> Message:
    """A copy of `message` safe to show in a chat message, card or ticket: every string
    displayable (kernel/text.py: no lone surrogate, no control or bidi character acting)
    and cut to its limit. Slack, Teams and Jira send this; JSON lines keep the original."""

    def other(text: str) -> str:
        return clip(displayable(text), OTHER_LIMIT)

    safe = map_text(message, other)
    e = message.transition.event
    event = map_text(e, shown_field)
    if e.description is not None:
        event = replace(event, description=clip(displayable(e.description), DESCRIPTION_LIMIT))
    return replace(safe, transition=replace(safe.transition, event=event))


def shown_field(text: str) -> str:
    """An event's field (id, type, a resource...) as `shown()` gives it to a sink. Applying
    it again changes nothing, so a key derived from it (Jira's label) is the same whether
    computed from the stored event or from the message a sink got."""
    return clip(displayable(text), FIELD_LIMIT)
