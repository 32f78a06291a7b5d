"""Every patch of the workflow in one place: what it guards, the release that added it, and when it may go.

A patch (Temporal's ``patched`` check) lets a release take a new path for new runs while runs started before it replay
the path they recorded. 1.0.0 is the baseline: it has no patch, and every stored history in
``replay_histories/`` was recorded on it but those of a later patch's new path, named for it
(``policy_read_locally_*``). ``docs/changing-workflow-code.md`` says when a change needs one.

**Adding one.** A member below, named for what it changes, whose value starts with the release that adds it
(``"1.1.0/store-credit-keys"``), and whose docstring says what the old path did. The code tests it by member,
``patched(Patch.STORE_CREDIT_KEYS)``, never by a string. Record a history of the new path
(``scripts/record_histories.py``) and keep the ones of the old path.

**Retiring one.** A patch may go once no open run was started before its release, since only those can replay
the old path. ``agent-worker patches`` lists each patch with its release and the oldest open ticket, from
Temporal's visibility; when the oldest open ticket started after the release went out, replace
the ``patched(P)`` check with ``deprecate_patch(P)`` and the new path alone, release, and after one
more such wait remove the call and the member. The stored histories of the old path go with it.
"""

from __future__ import annotations

from enum import StrEnum


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

    @property
    def release(self) -> str:
        """The release that added the patch: runs started before it was deployed take the old path."""
        return self.value.partition("/")[0]
