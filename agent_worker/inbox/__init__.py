"""The approval inbox: a web page, served by ``agent-worker web`` (and beside ``agent-worker dev`` and the demo),
where the people who approve refunds see the tickets waiting for them and answer with a button.

``desk`` reads tickets from Temporal, ``auth`` says who is asking, ``guard`` keeps out requests for host names
the inbox is not known by, ``app`` is the Starlette application (pages rendered on the server from
``templates/``, one small script in ``static/`` for live updates), its routes grouped by concern: ``login``,
``lists``, ``ticket_page``, ``answering`` (with ``sending``) and ``export``, on what every page shares
(``pages``, ``formats``). ``server`` runs it and refuses to run it unsafely. An answer goes to the ticket as the
``approve`` Workflow Update, signed for the person the inbox authenticated (``activities.vouching``): the approver
is who signed in, never a form field.
"""
