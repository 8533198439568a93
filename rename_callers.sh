#!/usr/bin/env bash
# Rename the callers of the store's old methods (one Store of 38 methods) to its
# repositories (store.events.get, store.approvals.claim, ...): issue 35, Deliver 4.
#
# Run from the repository's root on any tree (idempotent: a second run changes
# nothing). It edits src/, tests/, bench/, scripts/ and docs/ outside src/sebridge/store/,
# and prints each file it changed with its count. Generic names (apply, event, history,
# ...) are renamed only on receivers that are stores (an allowlist below); unique ones
# (claim_approvals, record_approval, ...) on any receiver. Look at what it printed.
set -euo pipefail
cd "$(dirname "$0")"

python3 - "$@" <<'PY'
import pathlib
import re
import sys

# old method -> (repository, new method)
UNIQUE = {
    "last_document": ("documents", "last"),
    "known_agents": ("agents", "known"),
    "agent_stopped": ("agents", "stopped"),
    "record_transition": ("transitions", "record"),
    "on_transition": ("transitions", "on_recorded"),
    "left_here": ("events", "left_here"),
    "approved_ids": ("approvals", "approved_ids"),
    "record_approval": ("approvals", "record"),
    "approve_anyway": ("approvals", "anyway"),
    "wait_again": ("approvals", "wait_again"),
    "claim_approvals": ("approvals", "claim"),
    "begin_post": ("approvals", "begin_post"),
    "has_pending_approvals": ("approvals", "has_pending"),
    "release_own_approvals": ("approvals", "release_own"),
    "finish_approval": ("approvals", "finish"),
    "begin_hook_run": ("hook_runs", "begin"),
    "finish_hook_run": ("hook_runs", "finish"),
    "record_hook_group": ("hook_runs", "record_group"),
    "hook_group": ("hook_runs", "group"),
    "interrupted_hook_runs": ("hook_runs", "interrupted"),
    "request_hook_retry": ("hook_retries", "request"),
    "history_size": ("history", "size"),
    "audit_entries": ("history", "audit_entries"),
    "remember_first": ("settings", "remember_first"),
}
# Only on a store receiver (and only called, but `remember`, which tests also replace).
GENERIC = {
    "apply": ("documents", "apply"),
    "polled": ("documents", "any_recorded"),
    "heartbeat": ("agents", "heartbeat"),
    "event": ("events", "get"),
    "events": ("events", "current"),
    "approval": ("approvals", "get"),
    "put_back": ("approvals", "put_back"),
    "hook_runs": ("hook_runs", "of_event"),
    "audit": ("history", "audit"),
    "history": ("history", "entries"),
    "prune": ("history", "prune"),
    "setting": ("settings", "get"),
    "remember": ("settings", "remember"),
}
# What a store is called where it is used: the last name of the receiver.
STORES = r"(?:store|_store|stores\[\d+\]|a|b|other|first|second|restarted|waiting|s|holding|agent|mine|reader|writer|cli|fresh)"
# The database's facts that engine/ and cli/ reached through store.db for.
DB_FACTS = [
    (r"\.store\.db\.IDLE_CHECK_SECONDS\b", ".store.idle_check_seconds"),
    (r"\bstore\.db\.IDLE_CHECK_SECONDS\b", "store.idle_check_seconds"),
    (r"\.db\.write_marker\(\)", ".write_marker()"),
    (r"\.store\.db\.watch\(", ".store.watch("),
    (r"\.store\.db\.duties\(\)", ".store.duties()"),
    (r"\.store\.db\.waiting_for\(\)", ".store.waiting_for()"),
    (r"\bstore\.db\.migrated_from\b", "store.migrated_from"),
    (r"\bstore\.db\.location\b", "store.location"),
    (r"read_tallies\(store\.db, metrics\.sinks\)", "store.tallies(metrics.sinks)"),
    (r"\n *from sebridge\.store\.tallies import read_tallies\n(?=(?:(?!read_tallies)[\s\S])*\Z)", "\n"),
]

rules: list[tuple[re.Pattern[str], str]] = []
for old, (repo, new) in UNIQUE.items():
    # `.old(`/`.old` not already after `.repo` (a second run), not part of a longer name.
    rules.append((re.compile(rf"(?<!\.{repo})\.{old}\b"), f".{repo}.{new}"))
    rules.append((re.compile(rf"\bStore\.{old}\b"), f"Store.{repo}.{new}"))
for old, (repo, new) in GENERIC.items():
    # Metrics has a polled() too (a test calls its Metrics `first`): stores called store only.
    stores = r"_?store" if old == "polled" else STORES
    tail = r"\b" if old == "remember" else r"\("
    end = "" if old == "remember" else "("
    rules.append(
        (
            re.compile(rf"(?<![\w.])((?:[\w\]\[]+\.)*{stores})(?<!\.{repo})\.{old}{tail}"),
            rf"\1.{repo}.{new}{end}",
        )
    )
    rules.append((re.compile(rf"\bStore\.{old}\b(?!\.)"), f"Store.{repo}.{new}"))
for old, (repo, new) in {**UNIQUE, **GENERIC}.items():  # monkeypatch.setattr(store, "old", ...)
    rules.append(
        (
            re.compile(rf"setattr\(((?:[\w\]\[]+\.)*{STORES}), \"{old}\""),
            rf'setattr(\1.{repo}, "{new}"',
        )
    )
rules += [(re.compile(p), r) for p, r in DB_FACTS]

# The one Protocol of the store's shape outside it: engine/reminders.py's ReminderStore.
REMINDER_OLD = re.compile(
    r"class ReminderStore\(Protocol\):\n    \"\"\"What reminders read and write of the store \(Store\)\.\"\"\"\n\n"
    r"    def events\(self\) -> list\[EventRecord\]:\n.*?\n\n\n",
    re.S,
)
REMINDER_NEW = '''class _EventReads(Protocol):
    def current(self) -> list[EventRecord]:
        """Events in the latest document."""
        ...


class _TransitionWrites(Protocol):
    def record(self, transition: Transition, sinks: Sequence[str], now: datetime) -> int | None:
        """Queue a transition once (None: recorded before)."""
        ...


class ReminderStore(Protocol):
    """What reminders read and write of the store (Store's repositories)."""

    @property
    def events(self) -> _EventReads: ...

    @property
    def transitions(self) -> _TransitionWrites: ...


'''
FLAKY_OLD = '''    def events(self) -> list[EventRecord]:
        if self.fail:
            self.fail -= 1
            self.failed += 1
            raise StoreError("the store went away")
        return self.store.events()

    def record_transition(
        self, transition: Transition, sinks: Sequence[str], now: datetime
    ) -> int | None:
        return self.store.record_transition(transition, sinks, now)
'''
FLAKY_NEW = '''    @property
    def events(self) -> Flaky:
        return self

    @property
    def transitions(self) -> Transitions:
        return self.store.transitions

    def current(self) -> list[EventRecord]:
        if self.fail:
            self.fail -= 1
            self.failed += 1
            raise StoreError("the store went away")
        return self.store.events.current()
'''

root = pathlib.Path(".")
files = [
    p
    for folder in ("src", "tests", "bench", "scripts", "docs")
    for p in (root / folder).rglob("*")
    if p.suffix in (".py", ".md")
    and "src/sebridge/store/" not in p.as_posix()
    and p.is_file()
]
changed: list[str] = []
for path in sorted(files):
    text = path.read_text()
    new = text
    count = 0
    if path.as_posix().endswith("engine/reminders.py"):
        new, n = REMINDER_OLD.subn(REMINDER_NEW, new)
        if not n and "_EventReads" not in new:
            print(f"{path}: ReminderStore not found as expected: rename it by hand", file=sys.stderr)
        count += n
    if path.as_posix().endswith("tests/test_reminders.py") and FLAKY_OLD in new:
        new = new.replace(FLAKY_OLD, FLAKY_NEW)
        if "from sebridge.store.transitions import Transitions" not in new:
            new = re.sub(
                r"^(from sebridge\.store import .*\n)",
                r"\1from sebridge.store.transitions import Transitions\n",
                new,
                count=1,
                flags=re.M,
            )
        count += 1
    for pattern, replacement in rules:
        new, n = pattern.subn(replacement, new)
        count += n
    if new != text:
        path.write_text(new)
        print(f"{path}: {count}")
        changed.append(str(path))
pathlib.Path(".rename_callers.changed").write_text("\n".join(changed))
PY
# Imports a rename left unused or unsorted, and the lines it made longer or shorter.
mapfile -t changed < <(grep '\.py$' .rename_callers.changed || true)
rm -f .rename_callers.changed
if ((${#changed[@]})); then
    ruff="${RUFF:-.venv/bin/ruff}"
    "$ruff" check --quiet --fix --select F401,I001 "${changed[@]}" || true
    "$ruff" format --quiet "${changed[@]}"
fi
