"""``agent-worker mail-in``: customers' mail in, as tickets and replies (``receiver``), read by the rules in
``reading``."""

from agent_worker.mail_in.reading import Attachment, MailOrigin, Refused
from agent_worker.mail_in.receiver import MailIn, listening

__all__ = ["Attachment", "MailIn", "MailOrigin", "Refused", "listening"]
