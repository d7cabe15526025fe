"""Numeric comparisons and ranges (pure; no Django)."""

import bisect
import operator

from delivery.rules.filters.operators.base import Operator
from delivery.rules.filters.values import finite, number_problem, scaled

NUMERIC_OPS = {"=": operator.eq, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


class Numeric(Operator):
    """{"numeric": ["=", 5]} or a range [">", 0, "<=", 150] ("Numeric value matching"); numbers compare to five
    digits after the decimal point."""

    name = "numeric"
    EXAMPLE = "such as [\"=\", 5] or [\">\", 0, \"<=\", 150]"

    def problem(self, terms):
        if not isinstance(terms, list) or len(terms) not in (2, 4):
            return f"must be one or two comparisons, {self.EXAMPLE}"
        pairs = [(terms[i], terms[i + 1]) for i in range(0, len(terms), 2)]
        for n, (op, value) in enumerate(pairs):
            if not isinstance(op, str) or op not in NUMERIC_OPS:
                return f"[{2 * n}]: unknown operator {str(op)[:20]!r}; use one of {', '.join(NUMERIC_OPS)}"
            problem = number_problem(value)
            if problem:
                return f"[{2 * n + 1}]: {problem}"
        if len(pairs) == 2:
            (low_op, low), (high_op, high) = pairs
            if low_op not in (">", ">=") or high_op not in ("<", "<="):
                return "a range is a lower bound (> or >=) then an upper bound (< or <=)"
            if scaled(low) >= scaled(high):
                return f"the lower bound {low} is not below the upper bound {high}"
        return None

    def one(self, terms, value):
        return finite(value) and all(NUMERIC_OPS[terms[i]](scaled(value), scaled(terms[i + 1]))
                                     for i in range(0, len(terms), 2))

    def any_in(self, terms, index):
        numbers = index.numbers
        if not numbers:
            return False
        if len(terms) == 2 and terms[0] == "=":
            at, wanted = bisect.bisect_left(numbers, scaled(terms[1])), scaled(terms[1])
            return at < len(numbers) and numbers[at] == wanted
        low = high = None
        for i in range(0, len(terms), 2):
            if terms[i] in (">", ">="):
                low = (terms[i], scaled(terms[i + 1]))
            else:
                high = (terms[i], scaled(terms[i + 1]))
        at = 0
        if low is not None:  # the smallest number above the lower bound ...
            at = (bisect.bisect_right if low[0] == ">" else bisect.bisect_left)(numbers, low[1])
        if at >= len(numbers):
            return False
        return high is None or NUMERIC_OPS[high[0]](numbers[at], high[1])  # ... is below the upper one
