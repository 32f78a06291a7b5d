"""``agent-worker mail-in``: the desk's mail server delivers customers' mail here (LMTP or SMTP, on aiosmtpd), and
each message becomes a ticket, or a reply to one, before the server is told it was taken.

The one promise to the sending server is the SMTP answer. ``250`` is said only once Temporal holds the message:
the ticket has started (or had started: the same message again starts nothing, its ticket id being a digest of its
``Message-ID``), or the ticket has accepted the reply as its ``customer_message`` update (whose id is that digest
too, so the same reply again is taken once). Anything that stops that (Temporal unreachable, a worker that does not
answer) is ``451``, and the sending server keeps the message and tries again; a receiver killed at any point has
said nothing yet, which the sender reads the same way. A message the desk will never take is ``5xx`` with the
reason, so its author hears of it (a message the parser cannot read included: no retry would read it better);
mail no person wrote (RFC 3834 auto-replies, bounces) is taken and recorded, and starts nothing, a bounce of the
desk's own mail being told to its ticket. Whether the sender is who the ``From:`` says is ``senders``' verdict,
which the ticket carries.

Every call to a ticket goes through ``agent_worker.tickets``, the client every program shares.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import structlog
from aiosmtpd.lmtp import LMTP
from aiosmtpd.smtp import SMTP, Envelope, Session
from pydantic import ValidationError
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowUpdateFailedError
from temporalio.common import MetricMeter
from temporalio.service import RPCError, RPCStatusCode

from activities.contracts.fields import describe_errors, same_address
from activities.contracts.names import MAIL_MEMO
from activities.contracts.ticket import CustomerMessage, MailBounce, TicketInput, TicketOptions
from agent_worker import tickets
from agent_worker.config import Settings
from agent_worker.mail_in import senders
from agent_worker.mail_in.reading import (
    Bounce,
    Incoming,
    Refused,
    automatic,
    bounce_of,
    key_of,
    parse,
    read,
    ticket_id_of,
)
from agent_worker.mail_in.senders import DnsTxt, TxtLookup, Verdict, dns_deadline
from agent_worker.wiring import reply_addresses
from workflows.waits import NO_MORE_REPLIES, UNVERIFIED_REPLY

log = structlog.get_logger(__name__)

VERIFIED = {"verified": "yes", "unverified": "no"}
"""The metric's ``verified`` label; ``unknown`` for a message refused or deferred before its sender was checked."""
DEFERRED = "451 4.3.0 The desk cannot take the message now; try again later"
STOPPING = "451 4.3.2 The receiver is stopping; try again later"


class MailIn:
    """The aiosmtpd handler: each message's ``DATA`` answered with what became of it."""

    def __init__(
        self,
        client: Client,
        settings: Settings,
        lookup: TxtLookup | None = None,
        *,
        meter: MetricMeter = MetricMeter.noop,
    ) -> None:
        self._client = client
        self._settings = settings
        self._replies = reply_addresses(settings)
        self._lookup = lookup or DnsTxt()
        """Where DKIM keys and DMARC records are looked up: the system's DNS, or the caller's."""
        self._taking = 0
        """Messages whose ``DATA`` is being answered: a stop waits for them (``drain``)."""
        self._idle = asyncio.Event()
        self._idle.set()
        self._stopping = False
        self._messages = meter.create_counter(
            "agent_mail_in_messages",
            "Messages the mail receiver answered, by outcome (accepted, ignored, refused, deferred) and kind",
            "1",
        )
        self._dns_unanswered = meter.create_counter(
            "agent_mail_in_dns_unanswered",
            "Messages taken unverified because DNS did not answer their DKIM or DMARC lookups within the deadline",
            "1",
        )

    async def handle_RCPT(  # noqa: N802 - the name aiosmtpd calls
        self, _server: SMTP, _session: Session, envelope: Envelope, address: str, _options: list[str]
    ) -> str:
        """One recipient a message: LMTP answers ``DATA`` once per recipient, which one answer here could not do
        truthfully, and a reply's recipient is the address it is routed by. A second is deferred (RFC 5321's
        ``452``): the mail server sends the message again for it, which is the same message, taken once."""
        if envelope.rcpt_tos:
            return "452 4.5.3 One recipient per message: send it again for this one"
        envelope.rcpt_tos.append(address)
        return "250 2.1.5 OK"

    async def handle_DATA(self, _server: SMTP, _session: Session, envelope: Envelope) -> str:  # noqa: N802 - aiosmtpd's
        data = envelope.original_content or b""
        if isinstance(envelope.content, bytes):
            data = envelope.content
        self._taking += 1
        self._idle.clear()
        try:
            if self._stopping:  # a stop waits for the messages it found, not for every one sent after it
                outcome, kind, status = "deferred", "message", STOPPING
            else:
                async with asyncio.timeout(self._settings.mail_in.answer_within_seconds):
                    outcome, kind, status = await self._take(data, envelope.mail_from or "", envelope.rcpt_tos)
        except Refused as refused:
            outcome, kind, status = "refused", refused.kind, refused.status
        except Exception as error:  # noqa: BLE001 - whatever it is, the sender keeps the message and retries
            log.warning("mail deferred", error=str(error) or type(error).__name__, mail_from=envelope.mail_from)
            outcome, kind, status = "deferred", "message", DEFERRED
        finally:
            self._taking -= 1
            if not self._taking:
                self._idle.set()
        what, _, verified = kind.partition(" ")
        counted = {"outcome": outcome, "kind": what, "verified": VERIFIED.get(verified, "unknown")}
        self._messages.with_additional_attributes(counted).add(1)
        log.info("mail answered", status=status, mail_from=envelope.mail_from, **counted)
        return status

    async def drain(self) -> None:
        """Once every message whose ``DATA`` had arrived has its answer written; one arriving from now on is
        deferred (``451``). Each answer comes within ``answer_within_seconds``, so a stop takes no longer: a deploy
        lets the messages in flight be answered rather than cut off. Cut off, none would be lost (no ``250`` was
        said), but the mail server would wait its retry interval and send each again."""
        self._stopping = True
        await self._idle.wait()

    async def _take(self, data: bytes, mail_from: str, recipients: list[str]) -> tuple[str, str, str]:
        """``(outcome, kind, SMTP answer)`` for a message Temporal now holds or that needs nothing of it."""
        try:
            message = parse(data, self._settings.mail_in)
            why = automatic(message, mail_from)
            bounce = bounce_of(message) if why else None
            incoming = None if why else read(data, message)
        except Refused:
            raise
        except Exception as error:  # noqa: BLE001 - the message's own: no retry will read it better
            raise Refused(f"554 5.6.0 The message cannot be read ({type(error).__name__}: {error})"[:500]) from None
        if incoming is None:
            if bounce is not None and (recorded := await self._bounced(bounce)):
                return "ignored", "bounce", recorded
            return "ignored", "automatic", f"250 2.0.0 Recorded; no ticket for mail no person wrote ({why})"
        limits = self._settings.mail_in
        verdict = await senders.verdict(
            data,
            incoming.domain,
            authserv_id=limits.authserv_id,
            lookup=self._lookup,
            within=dns_deadline(limits.answer_within_seconds),
        )
        answer = None
        for workflow_id in self._tickets_answered(incoming, recipients):
            answer = await self._continue(workflow_id, incoming, verdict)
            if answer is not None:
                break
        answer = answer or await self._start(incoming, verdict, follows=None)
        if verdict.dns_unanswered and answer[0] == "accepted":
            log.warning("mail taken unverified: DNS did not answer", why=verdict.how, message_id=incoming.message_id)
            self._dns_unanswered.add(1)
        return answer

    async def _bounced(self, bounce: Bounce) -> str | None:
        """The bounce told to the ticket whose email it was (named by the email's signed ``Reply-To``), and the
        answer saying so; None if no running ticket of this desk's is named."""
        ticket = self._replies.ticket_of(bounce.reply_to) if self._replies and bounce.reply_to else None
        if ticket is None:
            return None
        workflow_id = tickets.workflow_id_of(ticket)
        try:
            told = MailBounce(address=bounce.address, status=bounce.status, diagnostic=bounce.diagnostic)
            await tickets.report_bounce(self._client, workflow_id, told)
        except ValidationError:
            return None
        except RPCError as error:
            if error.status == RPCStatusCode.NOT_FOUND:  # the ticket has closed: nothing will mail the address
                return None
            raise
        log.warning("desk mail bounced", ticket=workflow_id, address=bounce.address, status=bounce.status)
        return f"250 2.0.0 Recorded on {workflow_id}: {bounce.address} refused its mail ({bounce.status})"

    def _tickets_answered(self, incoming: Incoming, recipients: list[str]) -> list[str]:
        """The tickets the message may answer, surest first: those its recipients' signed reply addresses name,
        then those its threading headers refer to (the messages that started them)."""
        signed = [self._replies.ticket_of(to) for to in recipients] if self._replies else []
        threaded = [ticket_id_of(key_of(replied_to)) for replied_to in incoming.refers_to]
        found = [tickets.workflow_id_of(ticket) for ticket in [*signed, *threaded] if ticket is not None]
        return list(dict.fromkeys(found))

    async def _continue(self, workflow_id: str, incoming: Incoming, verdict: Verdict) -> tuple[str, str, str] | None:
        """The reply passed on to ``workflow_id``, or a new ticket naming it if it has closed; None if there is
        no such ticket. Refused when its sender is not the ticket's customer (as the ticket was started with it,
        by mail or not): nothing of it reaches the ticket."""
        try:
            description = await tickets.describe(self._client, workflow_id)
        except RPCError as error:
            if error.status == RPCStatusCode.NOT_FOUND:
                return None
            raise
        customer = (await tickets.ticket_input(self._client, workflow_id, description.run_id)).get("customer_email")
        if not isinstance(customer, str) or not same_address(customer, incoming.sender):
            log.warning("reply refused", ticket=workflow_id, sender=incoming.sender, message_id=incoming.message_id)
            raise Refused(
                f"550 5.7.1 This reply comes from {incoming.sender}, not from the address the ticket is for; "
                "nothing of it was passed on",
                kind=_kind("reply", verdict),
            )
        if description.status != WorkflowExecutionStatus.RUNNING:
            return await self._start(incoming, verdict, follows=workflow_id)
        reply = CustomerMessage(
            text=incoming.text,
            sender_verified=verdict.verified,
            message_id=incoming.answerable_id,
            references=list(incoming.references),
        )
        try:
            receipt = await tickets.reply(self._client, workflow_id, reply, update_id=f"mail-{incoming.key}")
        except WorkflowUpdateFailedError as error:
            why = str(error.cause)
            if UNVERIFIED_REPLY in why:
                log.warning("reply refused", ticket=workflow_id, sender=incoming.sender, why=verdict.how)
                raise Refused(f"550 5.7.1 {UNVERIFIED_REPLY} ({verdict.how})", kind=_kind("reply", verdict)) from None
            if NO_MORE_REPLIES not in why:
                raise  # the ticket has more replies than a turn reads: the sender tries again later
            return await self._start(incoming, verdict, follows=workflow_id)
        except RPCError as error:
            if error.status != RPCStatusCode.NOT_FOUND:  # closed between the describe and the update
                raise
            return await self._start(incoming, verdict, follows=workflow_id)
        said = f"250 2.0.0 Passed on to {workflow_id} (turn {receipt.turn})"
        return "accepted", _kind("reply", verdict), _unthreaded(said, incoming, workflow_id)

    async def _start(self, incoming: Incoming, verdict: Verdict, follows: str | None) -> tuple[str, str, str]:
        try:
            ticket = TicketInput(
                ticket_id=incoming.ticket_id,
                question=incoming.text,
                customer_email=incoming.sender,
                options=TicketOptions(reply_window_seconds=self._settings.mail_in.reply_window_seconds),
                sender_verified=verdict.verified,
                message_id=incoming.answerable_id,
                references=list(incoming.references),
            )
        except ValidationError as error:
            raise Refused(f"550 5.6.0 The message cannot be a ticket: {describe_errors(error)}") from None
        memo = {MAIL_MEMO: incoming.origin(verdict, follows)}
        try:
            started = await tickets.start(self._client, ticket, self._settings.task_queue, memo=memo)
        except tickets.DuplicateTicketError as already:  # this very message, delivered again after its ticket ended
            return "accepted", _kind("again", verdict), f"250 2.0.0 Already taken as {already.workflow_id}"
        kind = "again" if started.already_running else ("follow-up" if follows else "new")
        said = f"250 2.0.0 Taken as {started.workflow_id}"
        return "accepted", _kind(kind, verdict), _unthreaded(said, incoming, started.workflow_id)


def _unthreaded(said: str, incoming: Incoming, workflow_id: str) -> str:
    """The answer to a message the ticket took, saying why the desk's email will not answer under its
    ``Message-ID`` if it will not (``Incoming.unanswerable``): the message is taken all the same, and its ticket
    is the one its id names (``key_of``), so a delivery again is still the same ticket."""
    if incoming.unanswerable is None:
        return said
    log.warning("mail not answered under its Message-ID", ticket=workflow_id, why=incoming.unanswerable)
    return f"{said}; the desk's answer will not thread under it: {incoming.unanswerable}"


def _kind(kind: str, verdict: Verdict) -> str:
    """What a message was, and whether its sender was verified: ``new verified``, ``reply unverified``."""
    return f"{kind} {'verified' if verdict.verified else 'unverified'}"


@asynccontextmanager
async def listening(
    client: Client,
    settings: Settings,
    *,
    port: int | None = None,
    lookup: TxtLookup | None = None,
    meter: MetricMeter = MetricMeter.noop,
) -> AsyncIterator[asyncio.Server]:
    """The receiver, listening where the settings say (``port`` 0: any free port, which the server's socket names)
    until the block ends; DKIM keys and DMARC records looked up by ``lookup`` (the system's DNS unless given). On
    the way out it stops listening and waits for the messages in flight to be answered (``MailIn.drain``): Python's
    server would otherwise leave their connections to be cancelled with the event loop, unanswered."""
    limits = settings.mail_in
    handler = MailIn(client, settings, lookup, meter=meter)
    protocol: type[SMTP] = LMTP if limits.protocol == "lmtp" else SMTP

    def connection() -> SMTP:
        kwargs: dict[str, Any] = {"data_size_limit": limits.max_message_bytes, "ident": "agent-worker mail-in"}
        return protocol(handler, enable_SMTPUTF8=True, **kwargs)

    server = await asyncio.get_running_loop().create_server(
        connection, host=limits.host, port=limits.port if port is None else port
    )
    try:
        yield server
    finally:
        server.close()
        await handler.drain()
        await server.wait_closed()
