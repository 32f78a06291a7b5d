"""The money policy the tests' workers run under, unless a test states its own.

The product's defaults are strict (``MoneyPolicy()``: 20.00 without a person, limits across tickets, two people
above 500.00, a model budget), and a ticket may only tighten them. Most tests are about something else (a crash,
a reply, a codec) and ask on the ticket for the limit they need, as a desk that allows it would let them; so their
workers, in process or not, read ``loose-policy.toml`` (as loose as the contract allows) the way an operator's
worker reads its file, and ``tests.support.tickets.ticket`` names the product's 20.00 limit on every ticket that
names none. The tests of the policy itself hand their workers the policy they test.
"""

from __future__ import annotations

from pathlib import Path

from agent_worker import policy_file

LOOSE_FILE = Path(__file__).with_name("loose-policy.toml")
LOOSE = policy_file.read(LOOSE_FILE)
