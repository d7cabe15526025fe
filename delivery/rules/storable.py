"""What PostgreSQL can store, and what a user or a receiver may hand us (pure; no Django).

PostgreSQL's `text` and `jsonb` reject NUL (`\\u0000`), UTF-8 cannot encode lone surrogates (`\\ud800`), `jsonb`
cannot hold infinities, and Python's recursive JSON tools fail on very deep nesting. User input that carries any
of these is refused with the path of the offending value; what a receiver sends back is cleaned and bounded
instead, because it is recorded whatever it is.
"""

import math
from collections.abc import Mapping

MAX_JSON_DEPTH = 64
MAX_HEADER_BYTES = 8192
MAX_HEADER_COUNT = 100
TRUNCATED_HEADER = "herald-truncated"


def clean_text(value: str, limit: int | None = None) -> str:
    """`value` without NUL characters, lone surrogates replaced by '?', cut to `limit` characters."""
    if limit is not None:
        value = value[:limit]
    if "\x00" in value:
        value = value.replace("\x00", "")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        value = value.encode("utf-8", "replace").decode("utf-8")
    return value


def clean_headers(headers: Mapping, *, max_bytes: int = MAX_HEADER_BYTES, max_count: int = MAX_HEADER_COUNT) -> dict:
    """Response headers as storable text, at most `max_count` of them and `max_bytes` in all. What is left out is
    counted under the `herald-truncated` key, so a reader knows the record is partial."""
    kept: dict[str, str] = {}
    used, dropped, dropped_bytes = 0, 0, 0
    for name, value in headers.items():
        name, value = clean_text(str(name), 256), clean_text(str(value))
        size = len(name) + len(value) + 4
        if len(kept) < max_count and used + size <= max_bytes:
            kept[name] = value
            used += size
        else:
            dropped += 1
            dropped_bytes += size
    if dropped:
        kept[TRUNCATED_HEADER] = f"{dropped} more headers ({dropped_bytes} bytes) not stored"
    return kept


def _text_problem(text: str) -> str | None:
    if "\x00" in text:
        return "contains a NUL character (\\u0000), which cannot be stored"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "contains a lone surrogate (e.g. \\ud800), which is not valid Unicode"
    return None


def json_problems(value, path: str = "", *, max_depth: int = MAX_JSON_DEPTH, most: int = 20) -> list[tuple[str, str]]:
    """Every (path, reason) that makes a parsed JSON value unstorable; [] when it can be stored as it is.

    Walks with an explicit stack, so a value nested deeper than Python's recursion limit is reported, not fatal."""
    problems: list[tuple[str, str]] = []
    stack = [(value, path, 0)]
    while stack and len(problems) < most:
        item, where, depth = stack.pop()
        if isinstance(item, (dict, list)) and depth >= max_depth:
            problems.append((where, f"nested more than {max_depth} levels deep"))
            continue
        if isinstance(item, dict):
            for key, child in item.items():
                child_path = f"{where}.{key}" if where else str(key)
                reason = _text_problem(key) if isinstance(key, str) else None
                if reason:
                    problems.append((where or "(root)", f"a key {reason}"))
                    continue
                stack.append((child, child_path, depth + 1))
        elif isinstance(item, list):
            stack.extend((child, f"{where}[{index}]", depth + 1) for index, child in enumerate(item))
        elif isinstance(item, str):
            reason = _text_problem(item)
            if reason:
                problems.append((where or "(root)", reason))
        elif isinstance(item, float) and not math.isfinite(item):
            problems.append((where or "(root)", "must be a finite number"))
    return problems
