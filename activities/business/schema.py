"""The business database's tables: one SQLAlchemy Core schema for SQLite and PostgreSQL.

Each outside system's embedded implementation reads and writes its own tables: ``orders`` and
``order_events`` (``activities.business.orders``), ``refunds`` (``payments``), ``emails`` (``mail``),
``idempotency_keys`` (the key ledger of payments, store credit and mail, ``keys``), ``store_credits`` (vouchers
issued instead of refunds, ``credits``), ``unattended_refunds`` (what was
refunded without a person, counted against the limits across tickets, ``unattended``), ``audit_log`` and
``answers`` (the audit trail and the answers to approval requests in it, ``audit``), ``model_calls``
(``model_calls``), ``blobs`` (``blobs``), and the approval inbox's ``inbox_sessions`` and
``inbox_sign_in_failures`` (``agent_worker.inbox.sessions`` and ``agent_worker.inbox.throttle``: the business
database is where every inbox process behind a load balancer finds the same sessions). They are declared
together because they are one database with one history of revisions: ``metadata`` is what the migrations
(``activities/migrations``) bring a database to, and what ``tests/test_migrations.py`` compares a migrated
database with, on both backends. A change here needs a revision.
"""

from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData()
orders = sa.Table(
    "orders",
    metadata,
    sa.Column("order_id", sa.Text, primary_key=True),
    sa.Column("amount_cents", sa.Integer, sa.CheckConstraint("amount_cents >= 0"), nullable=False),
    sa.Column("customer_email", sa.Text, nullable=False),
    sa.Column("stripe_payment", sa.Text),  # the order's PaymentIntent (pi_...) or Charge (ch_...) at Stripe
    sa.Column("currency", sa.Text, nullable=False, server_default="USD"),  # ISO 4217, upper case
)
refunds = sa.Table(
    "refunds",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("order_id", sa.Text, sa.ForeignKey("orders.order_id"), nullable=False, index=True),
    sa.Column("amount_cents", sa.Integer, sa.CheckConstraint("amount_cents > 0"), nullable=False),
    sa.Column("idempotency_key", sa.Text, index=True),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("provider_refund_id", sa.Text, index=True, unique=True),  # at Stripe (re_...); none if embedded
    sa.Column("status", sa.Text),  # what Stripe said of it: succeeded, pending, ...
)
emails = sa.Table(
    "emails",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("to_address", sa.Text, nullable=False),
    sa.Column("subject", sa.Text, nullable=False),
    sa.Column("body", sa.Text, nullable=False),
    sa.Column("idempotency_key", sa.Text, index=True),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),  # recorded: before it is handed over
    sa.Column("message_id", sa.Text),  # derived from the key, kept as recorded: every delivery carries the same
    sa.Column("delivered_at", sa.DateTime(timezone=True)),  # a server accepted it (embedded: when recorded)
    sa.Column("smtp_reply", sa.Text),  # the mail server's last word on it: its acceptance, or why not yet
    sa.Column("in_reply_to", sa.Text),  # the customer's mail it answers, kept as recorded like its Message-ID
    sa.Column("reference_ids", sa.Text),  # its References: the conversation's Message-IDs, space-separated
)
idempotency_keys = sa.Table(
    "idempotency_keys",
    metadata,
    sa.Column("key", sa.Text, primary_key=True),
    sa.Column("request", sa.Text, nullable=False),  # what was asked the first time, to refuse another request
    sa.Column("result_id", sa.Integer),  # the refund or email it produced, once committed
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("closed_at", sa.DateTime(timezone=True)),  # settled as never paid: refused for ever, never expires
)
unattended_refunds = sa.Table(
    "unattended_refunds",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("customer", sa.Text, nullable=False),  # the address as normalised_address writes it: one per mailbox
    sa.Column("amount_cents", sa.Integer, sa.CheckConstraint("amount_cents > 0"), nullable=False),
    sa.Column("counted_at", sa.DateTime(timezone=True), nullable=False, index=True),  # counts for 24 h from here
    sa.Column("idempotency_key", sa.Text, index=True),  # the key it was reserved under, to keep or release it
    sa.Column("refund_id", sa.Integer, sa.ForeignKey("refunds.id")),  # the refund it became; none yet: reserved
    sa.Column("currency", sa.Text),  # its order's, for the words of a reason; none: counted before rows kept it
    sa.Index("ix_unattended_refunds_customer_counted_at", "customer", "counted_at"),
)
store_credits = sa.Table(
    "store_credits",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),  # the voucher's number
    sa.Column("order_id", sa.Text, sa.ForeignKey("orders.order_id"), nullable=False, index=True),
    sa.Column("amount_cents", sa.Integer, sa.CheckConstraint("amount_cents > 0"), nullable=False),
    sa.Column("idempotency_key", sa.Text, index=True),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("counted_id", sa.Integer, sa.ForeignKey("unattended_refunds.id")),  # its count; none: a person approved
)
model_calls = sa.Table(
    "model_calls",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("ticket_id", sa.Text, nullable=False, index=True),
    sa.Column("step", sa.Integer, nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
)
audit_log = sa.Table(
    "audit_log",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("ticket_id", sa.Text, nullable=False, index=True),
    sa.Column("entry", sa.Text, nullable=False),
    sa.Column("idempotency_key", sa.Text, unique=True),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
)
answers = sa.Table(
    "answers",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("idempotency_key", sa.Text, nullable=False, unique=True),  # the audit entry's: written once with it
    sa.Column("ticket_id", sa.Text, nullable=False),
    sa.Column("workflow_id", sa.Text, nullable=False),
    sa.Column("request_id", sa.Text, nullable=False),
    sa.Column("decision", sa.Text, nullable=False),
    sa.Column("approver", sa.Text),
    sa.Column("channel", sa.Text),
    sa.Column("answered_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("amount_cents", sa.BigInteger),
    sa.Column("currency", sa.Text),
    sa.Column("order_id", sa.Text, nullable=False),
    sa.Column("customer_email", sa.Text, nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("policy_digest", sa.Text),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Index("ix_answers_answered_at", "answered_at"),
    sa.Index("ix_answers_approver_answered_at", "approver", "answered_at"),
)
blobs = sa.Table(
    "blobs",
    metadata,
    sa.Column("key", sa.Text, primary_key=True),  # sha256:<hex> of the data: a key names one content forever
    sa.Column("data", sa.LargeBinary, nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
)
order_events = sa.Table(
    "order_events",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("order_id", sa.Text, sa.ForeignKey("orders.order_id"), nullable=False, index=True),
    sa.Column("event", sa.Text, nullable=False),
)
inbox_sessions = sa.Table(
    "inbox_sessions",
    metadata,
    sa.Column("token_hash", sa.Text, primary_key=True),  # SHA-256 of the cookie's token: the token is never kept
    sa.Column("person", sa.Text, nullable=False, index=True),
    sa.Column("credential", sa.Text, nullable=False),  # a fingerprint of the password hash signed in with
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, index=True),  # ends at the maximum age
    sa.Column("last_seen_at", sa.DateTime(timezone=True), nullable=False, index=True),  # idle from here, to the minute
    sa.Column("address", sa.Text),  # where it was signed in from, for the operator's list
    sa.Column("user_agent", sa.Text),  # the browser that signed in, cut short, for the same list
)
inbox_sign_in_failures = sa.Table(
    "inbox_sign_in_failures",
    metadata,
    sa.Column("key", sa.Text, primary_key=True),  # person:<bucket> or address:<bucket>, never a name or an address
    sa.Column("failures", sa.Text, nullable=False),  # the unix milliseconds of its recent wrong passwords
    sa.Column("last_failed_at", sa.DateTime(timezone=True), nullable=False, index=True),  # forgotten a window after
)
