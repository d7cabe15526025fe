"""What a receiver sent, read by total functions (pure; no Django): each returns a value or a problem in words and
never raises, whatever came back (STYLE §12).

A receiver's answer reaches machinery every tenant shares (the pump's write-back, the handshake's and the token's
readers, the reconciler's replay of the journal), so a reader that raises fails far more than the row it reads:
`json.loads("[" * 4096)` raises RecursionError, not ValueError; `float("²")` raises though `"²".isdigit()` is true;
`float("1e400")` is infinity. Every reader of a receiver's text goes through here.
"""

import json
import math

MAX_JSON_CHARS = 64 * 1024  # what a reader looks at (bodies are kept to a 4 KiB excerpt before they get here)


def json_value(text, *, max_chars: int = MAX_JSON_CHARS) -> tuple[object, str]:
    """(the JSON value of `text`, "") or (None, why it is not one). Deep nesting, NUL, lone surrogates, numbers
    past a float, text longer than `max_chars` and anything that is not text are problems, not exceptions."""
    if not isinstance(text, str | bytes):
        return None, f"not text ({type(text).__name__})"
    if len(text) > max_chars:
        return None, f"longer than {max_chars} characters"
    try:
        return json.loads(text), ""
    except RecursionError:
        return None, "nested too deeply"
    except (ValueError, TypeError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        return None, f"not JSON ({type(exc).__name__})"


def finite_number(value, default: float) -> tuple[float, str]:
    """(a finite float of `value`, "") or (`default`, why not). Accepts JSON numbers and ASCII numeric strings;
    booleans, Unicode digits, infinities and NaN are problems."""
    if isinstance(value, bool):
        return default, "a boolean, not a number"
    if isinstance(value, str):
        if not value.isascii() or len(value) > 64:
            return default, "not a number"
    elif not isinstance(value, int | float):
        return default, f"not a number ({type(value).__name__})"
    try:
        number = float(value)
    except (ValueError, OverflowError):
        return default, "not a number"
    if not math.isfinite(number):
        return default, "not a finite number"
    return number, ""
