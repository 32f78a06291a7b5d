"""The wire contract between the workflow, its activities, its callers and its stored histories, by reader.

Everything that crosses a Temporal boundary is defined once, in the module of those who read it:

- ``names``: the workflow, task queue, signals, updates, queries, search attributes and memo fields;
- ``fields``: the base ``Contract`` and the field types every contract is made of (ids, addresses, cents);
- ``ticket``: what a ticket starts with, what reaches it while it is open, and the outcome it ends with;
- ``approvals``: a person's answers to a refund's request, and their records;
- ``conversation``: the conversation in the Anthropic Messages shape, and the model activity's requests;
- ``world``: what the tool activities ask of the outside systems and what they answer;
- ``continued``: what a run hands the run that continues it.

(Each tool's arguments are declared with the tool, in ``activities.tools``.) Payloads are JSON without module
paths, so moving a class between these modules changes no history; renaming a field does, so add fields with
defaults instead. It lives in ``activities/`` because the arrows point one way: workflows import activities'
contracts, activities import nothing from workflows.
"""
