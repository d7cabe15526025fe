"""The filter operators, one class each (an Operator: base.py), named by SNS's word for them; `conditions.OPERATORS`
lists them by name. Adding an operator is one class here, its argument's check, its meaning for one value and for
many values at once (through their `index.Index`), and its name in OPERATORS.

    exact         a plain value: a string, a number, true, false, null
    strings       prefix, suffix, equals-ignore-case
    wildcard      wildcard patterns, matched without backtracking (event-type filters use the matcher too)
    anything_but  anything-but: a value, a list, or a prefix, suffix or wildcard
    numeric       numeric comparisons and ranges, to five decimals
    cidr          an IPv4 or IPv6 address within a network
    exists        whether a key has a value
"""
