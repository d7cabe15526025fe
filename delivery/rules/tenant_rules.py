"""What a tenant's record may hold (pure; no Django). The API, the admin and `tenancy.tenant_create`/`tenant_update`
ask `problems`; the service is where it is enforced, for every door."""

import json

MAX_METADATA_BYTES = 4096
MAX_NAME = 200


def metadata_problem(value) -> str | None:
    if not isinstance(value, dict):
        return "must be an object"
    if len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()) > MAX_METADATA_BYTES:
        return f"must be at most {MAX_METADATA_BYTES} bytes as JSON"
    return None


def name_problem(value) -> str | None:
    if not isinstance(value, str) or len(value) > MAX_NAME:
        return f"must be text of at most {MAX_NAME} characters"
    return None


CHECKS = {"metadata": metadata_problem, "name": name_problem}


def problems(changes: dict) -> dict[str, str]:
    """{field: reason} for each of `changes` a rule refuses."""
    return {name: problem for name, check in CHECKS.items()
            if name in changes and (problem := check(changes[name])) is not None}
