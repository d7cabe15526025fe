"""What a catalog entry's name and description may be (pure; no Django). Its schema and example are the catalog's
(delivery/engine/accounts/catalog.py).

A name is one a publish may use: `herald.*` types are Herald's own (its confirmation, endpoint and dead-letter
events), which no one else may publish, so the catalog refuses them as a publish does (rules/publish_input.py).
A description is shown on every tenant's portal page of the catalog, so it is bounded.
"""

from delivery.rules.publish_input import event_type_problem

MAX_DESCRIPTION_CHARS = 1000


def problems(changes: dict) -> dict[str, str]:
    """{field: reason} for the name and description among `changes` that may not be stored."""
    found = {}
    if "name" in changes:
        reason = event_type_problem(changes["name"])
        if reason:
            found["name"] = reason
    description = changes.get("description")
    if description is not None and (not isinstance(description, str) or len(description) > MAX_DESCRIPTION_CHARS):
        found["description"] = f"must be at most {MAX_DESCRIPTION_CHARS} characters"
    return found
