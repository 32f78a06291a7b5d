"""``agent-worker eval DIR``: a suite of support tickets as data, run as real tickets, judged by what they did.

A scenario file (``scenario.py``) holds the orders, the ticket, what the customer and the world send later, how a
person answers an approval, and what must hold at the end. The runner (``runner.py``) runs each as a real ticket on
a real worker and dev server, with the model behind a local Messages API (``messages_api.py``) that answers from
recorded responses, from the scenario's own script, or by passing the request on to Claude and recording the
answer. The report (``report.py``) says which expectation passed or failed, with steps, tokens, cost and time.
"""
