"""Every patch of the workflow in one place: what it guards, the release that added it, and when it may go.

A patch (Temporal's ``patched`` check) lets a release take a new path for new runs while runs started before it replay
the path they recorded. 1.0.0 is the baseline: it has no patch, and every stored history in
``replay_histories/`` was recorded on it but those of a later patch's new path, named for it
(``policy_read_locally_*``). ``docs/changing-workflow-code.md`` says when a change needs one.

**Adding one.** A member below, named for what it changes, whose value starts with the release that adds it
(``"1.1.0/store-credit-keys"``), and whose docstring says what the old path did. The code tests it by member,
``taken(Patch.STORE_CREDIT_KEYS)``, never by a string. Record a history of the new path
(``scripts/record_histories.py``) and keep the ones of the old path.

**Asking.** Pieces ask ``taken(Patch.X)``, never ``workflow.patched`` itself. From 1.3.0 on, patches form a chain:
a run that takes a patch of the chain is new code and takes every patch before it too, so it asks Temporal
once, for the newest patch it takes, as it starts (``Taken.start``), and records one marker however many patches
its path meets; a run started before the chain asks each older patch where it always did, as its history says.

**Retiring one.** A patch may go once no open run was started before its release, since only those can replay
the old path. ``agent-worker patches`` lists each patch with its release and the oldest open ticket, from
Temporal's visibility; when the oldest open ticket started after the release went out, replace
the ``patched(P)`` check with ``deprecate_patch(P)`` and the new path alone, release, and after one
more such wait remove the call and the member. The stored histories of the old path go with it.
"""

from __future__ import annotations

from enum import StrEnum

from temporalio import workflow


class Patch(StrEnum):
    """The patches in force, each ``"<release>/<name>"``."""

    POLICY_LOCAL_ACTIVITY = "1.1.0/policy-local-activity"
    """The money policy is read by a local activity, in the workflow task that asks for it: a marker in the
    history, where 1.0.0 scheduled a ``money_policy`` activity and took a workflow task of its own to hear the
    answer. Two activities and their workflow tasks fewer a ticket (issue #25); the reads, what they answer and
    when they happen are the same."""

    ONE_PAYOUT_DECISION = "1.1.0/one-payout-decision"
    """Who must approve a payout is one decision (``approval_rules.decide``) of every rule at once: two people
    wherever the ticket's total passes the two-people threshold, even below the approval limit; a payout the
    order's charge cannot cover, or that needs more people than may approve it, refused without asking anyone;
    nobody where a policy change withdrew every approver the ticket named; people compared as mailboxes
    (``ApprovalRequest.identity``). Runs before it asked ``Payouts._needs_person``, which compared the approval
    limit only, then opened the request with the gate's own count of people and approvers."""

    WHOLE_HAND_OVER = "1.1.0/whole-hand-over"
    """A run continuing as new writes every answer that arrived while it wrote the audit trail and archived its
    records, and waits for the handlers those answers started, before it takes its snapshot. Runs before it took the
    snapshot right after those writes: an answer that came meanwhile was carried unaudited, and the next run, finding
    it missing from the trail, rejected it as forged. Reached only by such an answer, so no recorded run takes it."""

    UNANSWERED_CLOSING = "1.2.0/unanswered-closing"
    """A ticket whose refund waited past its deadline with nobody answering, and was not made, closes as
    ``unanswered`` (``Outcome.unanswered`` saying which request, until when), and the audit's closing line says so,
    in the request's currency. Runs before it closed such a ticket as ``declined``, as if a person had declined it,
    with "closed as declined ...; refunded 0.00"."""

    VERIFIED_SENDER_GATE = "1.2.0/verified-sender-gate"
    """A ticket whose sender is not verified (``TicketInput.sender_verified`` False: mail whose ``From:`` could not
    be verified) runs no tool that names an order: each is answered with a refusal the model reads, until a person
    verifies the sender (``verify_sender``) or a verified reply arrives. Runs before it had no unverified tickets:
    every ticket's address was its caller's word, and every order of that address was the ticket's to act on."""

    AUDITED_WHERE_DONE = "1.3.0/audited-where-done"
    """No activity exists only to write the audit trail on a ticket's usual path: the money policy's entry is
    written by the ``money_policy`` read that finds it, and the closing line by a local activity (``closing``) in
    the workflow task that closes the run. Runs before it wrote each by an ``audit`` activity of its own, with its
    workflow task: two activities and 12 history events more a ticket (issue #37)."""

    POLICY_AT_BOOKING = "1.4.0/policy-at-booking"
    """A payout that needs no person is judged by the policy as the run last read it, and booked only where that
    policy is in force (``RefundRequest.policy``): the booking refuses one judged by another, with nothing paid,
    and the policy is then read again. A payout that asks a person, or is refused, reads it first. Runs before
    it read the policy again at every payout (a ``money_policy`` local activity: a marker, and a Cloud Action,
    more a refunded ticket, issue #37)."""

    SETTLED_IN_MEMO = "1.5.0/settled-in-memo"
    """What the money did for an approved request (``Settlement``: paid with its id, refused by the booking with its
    reason, or still open) is written to the ticket's memo (``SETTLED_MEMO``) as the ticket learns it, for
    ``approve``, ``show`` and the inbox to tell the person. Runs before it said only what the approval gate decided, so
    ``approve`` reported "makes the refund" for a refund the booking then refused."""

    LEDGER_BEFORE_ASKING = "1.5.0/ledger-before-asking"
    """A payout that would ask a person looks the order up again first (a ``lookup_order`` activity) and is judged
    by what was paid back as the ledger has it now: one the order can no longer cover is refused with nobody asked.
    Runs before it judged by the order as the run first looked it up, so after another ticket paid the order back,
    or after a booking refused a payout as already paid back, a person was asked again for money no answer could
    pay."""

    ONE_WAIT_RULE = "1.5.0/one-wait-rule"
    """Every wait, the approval wait included, continues as new by one rule (``Continuation.wait``): the server's
    suggestion, or ``WAIT_EVENTS_BEFORE_CONTINUING`` events (8,000, below the server's cap of 10,000 signals a run),
    whichever comes first. Runs before it heard only the server's suggestion in the approval wait, so on a server
    whose suggestion is raised a flood of signals grew the waiting run until Temporal ended it or refused every
    signal; their reply and event waits counted to 10,240 events, past that cap."""

    @property
    def release(self) -> str:
        """The release that added the patch: runs started before it was deployed take the old path."""
        return self.value.partition("/")[0]


CHAIN: tuple[Patch, ...] = tuple(Patch)[tuple(Patch).index(Patch.AUDITED_WHERE_DONE) :]
"""The patches of the chain (``Taken``), oldest first: every patch from 1.3.0 on. A new one is added at the end."""


class Taken:
    """Which patches one run takes. ``start`` asks for the chain's patches, newest first, until one is taken: a run
    that takes it takes every patch declared before it, with no marker of its own. Any other patch is asked of
    Temporal, as runs before the chain asked it."""

    def __init__(self) -> None:
        self._newest: int | None = None
        """The index in ``CHAIN`` of the newest patch the run takes; None: none of the chain's."""
        self._started = False

    def start(self) -> None:
        """Ask once, first in the run, before anything awaits (a patch asked in a workflow task right after a
        local activity resolves can be placed otherwise on replay)."""
        if self._started:
            return
        self._started = True
        for index in reversed(range(len(CHAIN))):
            if workflow.patched(CHAIN[index]):  # noqa: TID251 - the one place that asks Temporal
                self._newest = index
                return

    def __call__(self, patch: Patch) -> bool:
        self.start()
        if patch in CHAIN:
            return self._newest is not None and CHAIN.index(patch) <= self._newest
        return self._newest is not None or workflow.patched(patch)  # noqa: TID251 - as above


def taken(patch: Patch) -> bool:
    """Whether the current run takes ``patch``'s new path: what every piece asks instead of ``workflow.patched``.
    The run's ``Taken`` is the workflow's ``patches`` attribute, found through ``workflow.instance()`` so the pieces
    need not be handed it; a workflow without one (a test's variant) asks Temporal, as before the chain."""
    instance = workflow.instance()
    patches = getattr(instance, "patches", None)
    return patches(patch) if isinstance(patches, Taken) else workflow.patched(patch)  # noqa: TID251 - as above
