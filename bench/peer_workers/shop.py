"""The shop the peers' tools act on, and the script their models play: the standard library only, so the same file
is imported by the bench (this project's environment) and by each peer's worker (its own environment).

The tools do what this project's tools do at the least: one read, then a refund and an email each committed to
SQLite (WAL, as the product's business database), so no system is measured on in-memory dicts against another's
commits. None of them checks whose order it is, carries an idempotency key or writes an audit trail: those are this
project's, and the bench's table says so.
"""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

SCHEMA = """
CREATE TABLE IF NOT EXISTS orders (order_id TEXT PRIMARY KEY, amount_cents INTEGER, customer_email TEXT);
CREATE TABLE IF NOT EXISTS refunds (refund_id INTEGER PRIMARY KEY, order_id TEXT, amount_cents INTEGER);
CREATE TABLE IF NOT EXISTS emails (email_id INTEGER PRIMARY KEY, recipient TEXT, subject TEXT, body TEXT);
"""

INSTRUCTIONS = "You are a support agent: look up the order, refund it, email the customer, then answer."
STEPS = 4
"""Model calls in the ticket, on every system: look up, refund, email, answer."""


class Shop:
    """Orders, refunds and emails in one SQLite file; one connection per call, as a thread pool's activities do."""

    def __init__(self, path: Path | str) -> None:
        self.path = str(path)

    def connect(self) -> sqlite3.Connection:
        connection = sqlite3.connect(self.path, timeout=30)
        connection.execute("PRAGMA journal_mode = WAL")
        return connection

    def create(self) -> Shop:
        with self.connect() as connection:
            connection.executescript(SCHEMA)
        return self

    def add_order(self, order_id: str, amount_cents: int, customer_email: str) -> None:
        with self.connect() as connection:
            connection.execute("INSERT INTO orders VALUES (?, ?, ?)", (order_id, amount_cents, customer_email))

    def lookup_order(self, order_id: str) -> str:
        with self.connect() as connection:
            row = connection.execute(
                "SELECT order_id, amount_cents, customer_email FROM orders WHERE order_id = ?", (order_id,)
            ).fetchone()
        if row is None:
            return json.dumps({"error": f"There is no order {order_id}"})
        return json.dumps({"order_id": row[0], "amount_cents": row[1], "customer_email": row[2]})

    def issue_refund(self, order_id: str, amount_cents: int) -> str:
        with self.connect() as connection:
            cursor = connection.execute(
                "INSERT INTO refunds (order_id, amount_cents) VALUES (?, ?)", (order_id, amount_cents)
            )
        return json.dumps({"refund_id": cursor.lastrowid, "order_id": order_id, "amount_cents": amount_cents})

    def send_email(self, to: str, subject: str, body: str) -> str:
        with self.connect() as connection:
            cursor = connection.execute(
                "INSERT INTO emails (recipient, subject, body) VALUES (?, ?, ?)", (to, subject, body)
            )
        return json.dumps({"email_id": cursor.lastrowid, "to": to})

    def count(self, table: str) -> int:
        assert table in {"orders", "refunds", "emails"}
        with self.connect() as connection:
            return int(connection.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


def next_move(question: str, results: list[str]) -> tuple[str, dict[str, object]] | str:
    """The scripted model: from the customer's question and the tool results so far, the next tool call (its name and
    arguments) or, once the three tools have run, the answer. The same script on every system, at zero think time."""
    if not results:
        match = re.search(r"order ([A-Z]-\d+)", question)
        return "lookup_order", {"order_id": match.group(1) if match else ""}
    order = json.loads(results[0])
    if len(results) == 1:
        return "issue_refund", {"order_id": order["order_id"], "amount_cents": order["amount_cents"]}
    if len(results) == 2:
        refund = json.loads(results[1])
        body = f"We have refunded order {order['order_id']} (refund #{refund['refund_id']})."
        return "send_email", {"to": order["customer_email"], "subject": "Your refund", "body": body}
    return f"I have refunded order {order['order_id']} and emailed you about it."
