"""A message as the receiver reads it: parsed by the standard library (``email.policy.default``), held to the desk's
limits, told apart from mail no person wrote, and reduced to what a ticket takes: who wrote, the words they wrote
this time, and what else came with them.

Nothing here talks to Temporal, so every rule about a message can be tested on bytes alone; what the receiver
does with a message is ``agent_worker.mail_in.receiver``'s. A message this module refuses raises ``Refused`` with
the permanent SMTP status the sending server reports back to its author, so nothing is accepted and then dropped.
"""

from __future__ import annotations

import email
import email.policy
import hashlib
import re
from dataclasses import dataclass
from email.message import EmailMessage, MIMEPart
from typing import Any

from inscriptis import get_text
from mailparser_reply import EmailReplyParser
from pydantic import Field, NonNegativeInt, TypeAdapter, ValidationError

from activities.contracts.fields import MESSAGE_ID_PATTERN, Contract, MessageId, trimmed_chain
from activities.contracts.limits import TEXT_CHARS
from agent_worker.config.mail_in import MailInSettings
from agent_worker.mail_in.senders import Verdict

NAME_CHARS = 200
"""An attachment's name as the ticket records it: longer ones are cut (the name is only for the person reading)."""
ATTACHMENTS_LISTED = 50
"""Attachments a ticket lists by name; past them it counts them (the receiver's ``max_parts`` is the real bound)."""
AUTOMATIC_PRECEDENCE = frozenset({"bulk", "list", "junk"})
"""``Precedence`` values of mail sent to many or by machine: never answered, so never a ticket."""
LIST_FIELDS = ("List-Id", "List-Unsubscribe")
"""Fields a mailing list adds to the copies it sends (RFC 2919, RFC 2369): no person wrote that copy to the desk."""
REPORTS = frozenset({"message/delivery-status", "message/global-delivery-status"})
"""A delivery status notification's machine-readable part (RFC 3464, RFC 6533)."""
MESSAGE_ID = re.compile(MESSAGE_ID_PATTERN)
ANSWERABLE: TypeAdapter[str] = TypeAdapter(MessageId)
"""The ``Message-ID`` s the desk's answer may name: a stranger's header, checked before it goes anywhere."""


class Refused(Exception):  # noqa: N818 - what it is, like the SMTP answer it carries
    """A message the desk will never take, for a reason its author can act on: ``status`` is the SMTP answer
    (``5xx``), which the sending server turns into a bounce to the author with the reason in it."""

    def __init__(self, status: str, *, kind: str = "message") -> None:
        super().__init__(status)
        self.status = status
        self.kind = kind
        """What was refused, for the receiver's count: a ``message``, or a ``reply verified`` or not."""


class Attachment(Contract):
    """What a ticket records of an attachment: never its content, which no model reads."""

    name: str
    bytes: NonNegativeInt


class MailOrigin(Contract):
    """The ``mail`` memo of a ticket started by mail: where it came from, for the people who read the ticket."""

    message_id: str
    """The ``Message-ID`` of the message that started it, or ``sha256:<digest>`` of a message without one."""
    sender: str
    """The ``From:`` address: the ticket's customer, and the only address whose replies it takes."""
    attachments: list[Attachment] = Field(default_factory=list)
    unlisted_attachments: NonNegativeInt = 0
    follows: str | None = None
    """The workflow id of the closed ticket this message replied to, which it continues as a new ticket."""
    verified: bool = False
    """Whether the message was verified to be from ``sender`` (``agent_worker.mail_in.senders``)."""
    verified_how: str = ""
    """What verified it, or why nothing did."""


@dataclass(frozen=True)
class Incoming:
    """A person's message, read: what starts a ticket or continues one."""

    message_id: str
    key: str
    """A digest of ``message_id``: the same for every delivery of the message, and safe in ids and keys."""
    sender: str
    text: str
    """The words the customer wrote this time: the plain text, or the HTML as text, without quoted history."""
    attachments: list[Attachment]
    unlisted_attachments: int
    refers_to: list[str]
    """The ``Message-ID`` s it answers, nearest first: ``In-Reply-To``, then ``References`` newest to oldest."""
    answerable_id: str | None = None
    """Its ``Message-ID`` if the desk's answer may name it (``MessageId``: bounded, printable ASCII): what the
    ticket's emails answer. None without one, or with one the desk does not write into a header (``unanswerable``)."""
    references: tuple[str, ...] = ()
    """The conversation it belongs to, oldest first (``References``, or ``In-Reply-To``), as far as the desk's
    answer may name it: each id checked as ``answerable_id`` is, those it would not write left out."""
    unanswerable: str | None = None
    """Why its ``Message-ID`` is not one the desk's answer names (too long, not printable ASCII), if it is not."""

    @property
    def ticket_id(self) -> str:
        """The ticket this message starts if it starts one: a delivery again starts the same one, which Temporal
        refuses to start twice."""
        return ticket_id_of(self.key)

    @property
    def domain(self) -> str:
        return self.sender.rpartition("@")[2]

    def origin(self, verdict: Verdict, follows: str | None = None) -> MailOrigin:
        return MailOrigin(
            message_id=self.message_id,
            sender=self.sender,
            attachments=self.attachments,
            unlisted_attachments=self.unlisted_attachments,
            follows=follows,
            verified=verdict.verified,
            verified_how=verdict.how,
        )


def key_of(message_id: str) -> str:
    """A message's key: 96 bits of its ``Message-ID``'s digest, short enough that ``mail-<key>`` fits a signed
    reply address's 64-octet local part beside a desk address of up to 17 characters before its ``@``
    (``activities.business.reply_addresses``)."""
    return hashlib.sha256(message_id.encode()).hexdigest()[:24]


def ticket_id_of(key: str) -> str:
    """The ticket a message of this key starts: ``mail-<key>``, the workflow ``ticket-mail-<key>``."""
    return f"mail-{key}"


def parse(data: bytes, limits: MailInSettings) -> EmailMessage:
    """The message, parsed, held to the desk's limits on headers and parts (its size the server held already)."""
    message = email.message_from_bytes(data, _class=EmailMessage, policy=email.policy.default)
    for name, value in message.raw_items():
        if len(str(value)) > limits.max_header_chars:
            raise Refused(
                f"552 5.3.4 The {name[:40]} header is {len(str(value))} characters long; the desk takes headers of "
                f"at most {limits.max_header_chars}"
            )
    parts = sum(1 for _ in message.walk())
    if parts > limits.max_parts:
        raise Refused(f"552 5.3.4 The message has {parts} MIME parts; the desk takes at most {limits.max_parts}")
    return message


def automatic(message: EmailMessage, mail_from: str) -> str | None:
    """Why no person is waiting for an answer to ``message``, or None: RFC 3834's marks (``Auto-Submitted`` other
    than ``no``, in any of the fields, a comment aside; ``Precedence: bulk, list, junk``), a mailing list's (RFC 2919's
    ``List-Id``, RFC 2369's ``List-Unsubscribe``: a list's copy of a message, which its author did not send to the
    desk) and a bounce's. Answering such mail is how loops and backscatter start, so it never opens a ticket."""
    if mail_from.strip() in ("", "<>"):
        return "a null return path (a bounce or another notification)"
    for value in message.get_all("Auto-Submitted", []):
        submitted = _without_comments(str(value)).split(";")[0].strip().lower()
        if submitted != "no":
            return f"Auto-Submitted: {submitted[:40] or '(empty)'}"
    for value in message.get_all("Precedence", []):
        precedence = _without_comments(str(value)).strip().lower()
        if precedence in AUTOMATIC_PRECEDENCE:
            return f"Precedence: {precedence}"
    for name in LIST_FIELDS:
        if name in message:
            return f"{name}: a mailing list's copy"
    if message.get_content_type() == "multipart/report" or any(p.get_content_type() in REPORTS for p in message.walk()):
        return "a delivery status notification"
    return None


@dataclass(frozen=True)
class Bounce:
    """What a delivery status notification says of one of the desk's emails: who refused it for good, and the
    headers of the email as it left (which carry its ``Reply-To``, and so its ticket)."""

    address: str
    status: str
    diagnostic: str
    reply_to: str | None


def bounce_of(message: EmailMessage) -> Bounce | None:
    """The failed delivery a notification reports (RFC 3464: ``Action: failed``), or None for a delay, a success,
    or a report that names no recipient or carries no headers of the email."""
    fields = [block for part in message.walk() if part.get_content_type() in REPORTS for block in _blocks(part)]
    failed = next((block for block in fields if str(block.get("Action", "")).strip().lower() == "failed"), None)
    recipient = str(failed.get("Final-Recipient", "")) if failed is not None else ""
    if failed is None or ";" not in recipient:
        return None
    original = next((_headers(part) for part in message.walk() if part.get_content_type() in ORIGINALS), EmailMessage())
    reply_to = original.get("Reply-To")
    return Bounce(
        address=recipient.partition(";")[2].strip(),
        status=str(failed.get("Status", "5.0.0")).strip()[:20],
        diagnostic=" ".join(str(failed.get("Diagnostic-Code", "")).split())[:500],
        reply_to=str(reply_to) if reply_to else None,
    )


ORIGINALS = frozenset({"text/rfc822-headers", "message/rfc822", "message/global-headers"})
"""The parts of a notification that hold the email it is about: its headers, or the whole of it."""


def _blocks(part: MIMEPart) -> list[EmailMessage]:
    """The header blocks of a ``message/delivery-status`` part: the message's, then one per recipient."""
    payload = part.get_payload()
    return [block for block in payload if isinstance(block, EmailMessage)] if isinstance(payload, list) else []


def _headers(part: MIMEPart) -> EmailMessage:
    payload = part.get_payload()
    if isinstance(payload, list) and payload and isinstance(payload[0], EmailMessage):
        return payload[0]
    text = payload if isinstance(payload, str) else ""
    return email.message_from_string(text, _class=EmailMessage, policy=email.policy.default)


def read(data: bytes, message: EmailMessage) -> Incoming:
    """A person's message as a ticket takes it, or ``Refused`` saying what is missing or too long."""
    message_id = _message_id(message) or f"sha256:{hashlib.sha256(data).hexdigest()}"
    body = message.get_body(preferencelist=("plain", "html"))
    if body is None:
        raise Refused("550 5.6.0 The message has no text: the desk reads plain-text or HTML mail")
    text = _new_words(_text_of(body))
    if not text:
        raise Refused("550 5.6.0 The message has no text of its own besides what it quotes")
    if len(text) > TEXT_CHARS:
        raise Refused(f"552 5.3.4 The message's text is {len(text)} characters; the desk reads at most {TEXT_CHARS}")
    attachments = [_attachment(part) for part in message.walk() if _attached(part, body)]
    answerable_id, unanswerable = _answerable_id(message)
    return Incoming(
        message_id=message_id,
        key=key_of(message_id),
        sender=_sender(data, message),
        text=text,
        attachments=attachments[:ATTACHMENTS_LISTED],
        unlisted_attachments=max(0, len(attachments) - ATTACHMENTS_LISTED),
        refers_to=_refers_to(message),
        answerable_id=answerable_id,
        references=_references(message),
        unanswerable=unanswerable,
    )


def _message_id(message: EmailMessage) -> str | None:
    found = MESSAGE_ID.search(str(message.get("Message-ID", "")))
    return found.group(0) if found else None


FROM_FIELD = re.compile(rb"^from[ \t]*:", re.IGNORECASE | re.MULTILINE)
"""A ``From:`` field's start, as any reader of the header may take it: obsolete syntax allows blanks before the
colon (RFC 5322, 4.5.2), which Python's parser reads as no field at all and another reader (the desk's mail server
judging DMARC) as the ``From:``."""
HEADER_END = re.compile(rb"\r?\n\r?\n")


def _sender(data: bytes, message: EmailMessage) -> str:
    """The one address the message is from, or ``Refused`` saying why there is not one. RFC 5322 allows one
    ``From:`` field; with two, the desk's mail server may judge one (its ``dmarc=pass``) and the desk read the other,
    so a stranger would borrow a verified customer's name. A ``From:`` of several mailboxes is refused too, with a
    ``Sender:`` or not: a ticket has one customer, and DMARC judges the ``From:`` domains, not the ``Sender:``."""
    fields = len(FROM_FIELD.findall(HEADER_END.split(data, maxsplit=1)[0]))
    if fields > 1:
        raise Refused(
            f"550 5.7.1 The message has {fields} From: fields; RFC 5322 allows one, and the desk cannot tell which "
            "of them wrote it"
        )
    try:
        header: Any = message["From"]
        addresses: list[str] = [str(address.addr_spec) for address in header.addresses] if header is not None else []
    except (AttributeError, IndexError, ValueError):  # a From: the parser could not read as addresses
        addresses = []
    if len(addresses) > 1:
        raise Refused(
            f"550 5.7.1 The From: field names {len(addresses)} mailboxes; the desk answers one person, so it takes "
            "mail from one address (a Sender: field does not change that)"
        )
    if len(addresses) != 1 or "@" not in addresses[0]:
        raise Refused("550 5.1.7 The message must come from exactly one address (its From: header) to be answered")
    return addresses[0]


def _without_comments(value: str) -> str:
    """A structured field's value without its comments (RFC 5322's ``(...)``, nested ones too)."""
    while (bare := re.sub(r"\([^()]*\)", " ", value)) != value:
        value = bare
    return value


def _text_of(part: MIMEPart) -> str:
    try:
        content = part.get_content()
    except (LookupError, ValueError) as error:  # an unknown charset, a broken transfer encoding
        raise Refused(f"554 5.6.0 The message's text cannot be read: {error}") from None
    if not isinstance(content, str):
        raise Refused("554 5.6.0 The message's text part holds no text")
    return str(get_text(content)) if part.get_content_type() == "text/html" else content


def _new_words(text: str) -> str:
    """What the author wrote this time: quoted history ("On ... wrote:", ``>`` lines) and signatures cut by
    mail-parser-reply; the whole text where it finds nothing of its own (a reply written below the quote)."""
    cut = EmailReplyParser(languages=["en", "de", "fr", "es", "it", "nl"]).parse_reply(text)
    return str(cut or text).strip()


def _attached(part: MIMEPart, body: MIMEPart) -> bool:
    """Whether ``part`` is something besides the words: not a container, not the body or its alternative."""
    if part.is_multipart() or part is body:
        return False
    return part.is_attachment() or part.get_content_maintype() != "text"


def _attachment(part: MIMEPart) -> Attachment:
    name = part.get_filename() or f"(unnamed {part.get_content_type()})"
    payload = part.get_payload(decode=True)
    printable = "".join(c if c.isprintable() else "?" for c in name)
    return Attachment(name=printable[:NAME_CHARS], bytes=len(payload) if isinstance(payload, bytes) else 0)


def _answerable_id(message: EmailMessage) -> tuple[str | None, str | None]:
    """The message's ``Message-ID`` if the desk's answer may name it, else None and why not (None without one).
    It comes from whoever wrote the message: one that is too long, or holds anything but printable ASCII (a control
    character, a line break an encoded word decoded to), is not written into the desk's header: the answer
    threads less well, and never carries a header a stranger wrote."""
    own = _message_id(message)
    if own is None:  # none at all, or one a decoded encoded word broke over lines
        return None, "its Message-ID header holds no <id> the desk can read" if "Message-ID" in message else None
    try:
        ANSWERABLE.validate_python(own)
    except ValidationError as error:
        return None, f"its Message-ID is not one the desk's answer names ({error.errors(include_url=False)[0]['msg']})"
    return own, None


def _references(message: EmailMessage) -> tuple[str, ...]:
    """The conversation the message belongs to, oldest first (RFC 5322, 3.6.4: its ``References``, or else its
    ``In-Reply-To``), each an id the desk's answer may name (the others left out), at most ``REFERENCES_KEPT``."""
    chain = MESSAGE_ID.findall(str(message.get("References", ""))) or MESSAGE_ID.findall(
        str(message.get("In-Reply-To", ""))
    )
    return tuple(trimmed_chain([i for i in chain if _answerable(i)]))


def _answerable(message_id: str) -> bool:
    try:
        ANSWERABLE.validate_python(message_id)
    except ValidationError:
        return False
    return True


def _refers_to(message: EmailMessage) -> list[str]:
    replied = MESSAGE_ID.findall(str(message.get("In-Reply-To", "")))
    references = MESSAGE_ID.findall(str(message.get("References", "")))[::-1]
    return list(dict.fromkeys([*replied, *references]))
