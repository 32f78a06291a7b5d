"""The model's call log: a row for every answer the model gave, so tests and operators can count calls.

The ``think`` activity records each answer; the scripted model reads the log back to know whether it was
asked about a step before (a real model's change of mind when asked again, which the crash tests need).
``SqlModelCalls`` keeps it in the ``model_calls`` table of the business database.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from activities.business.database import Database
from activities.business.schema import model_calls


@dataclass(frozen=True)
class ModelCall:
    ticket_id: str
    step: int
    created_at: datetime


class ModelCalls(Protocol):
    def record(self, ticket_id: str, step: int) -> None: ...

    def of(self, ticket_id: str) -> list[ModelCall]:
        """The ticket's calls, in the order they were answered."""
        ...


class SqlModelCalls:
    """The embedded call log (``ModelCalls``)."""

    def __init__(self, database: Database) -> None:
        self.database = database

    def record(self, ticket_id: str, step: int) -> None:
        with self.database.writer.begin() as db:
            db.execute(model_calls.insert().values(ticket_id=ticket_id, step=step, created_at=self.database.clock()))

    def of(self, ticket_id: str) -> list[ModelCall]:
        with self.database.reader.connect() as db:
            rows = db.execute(
                model_calls.select().where(model_calls.c.ticket_id == ticket_id).order_by(model_calls.c.id)
            )
            return [ModelCall(row.ticket_id, row.step, row.created_at) for row in rows]
