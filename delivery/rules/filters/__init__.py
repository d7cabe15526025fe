"""A subscription's filters, as Amazon SNS defines filter policies (pure; no Django). The rest of Herald imports
`policy`; the other modules are its parts, each one concept:

    policy       what the rest of Herald asks: check a policy (`validate`, `problems`), match a message
                 (`failing_key`, `matches`, `body_of`), say why one did not match (`explain`)
    reading      a policy read into a tree once (`shape`): scopes, dotted paths, nested policies, `$or`
    limits       SNS's limits: keys, combinations, wildcard conditions, size
    payload      what a message holds at one step of a path: leaf values, objects, the payload's dotted keys
    matching     walking a message along the tree; the first key it fails
    explaining   why a message failed, in words
    conditions   one condition: its operator (OPERATORS, by name), what is wrong with it, whether it holds
    operators/   one class per operator: its argument's check, its meaning for one value, for many at once
    index        a key's values indexed for the operators to ask about many at once
    values       leaf values: their kinds, how exact values compare (numbers to five decimals)
    errors       FilterPolicyError, the refusal every part raises

May use: subscriptions.states, delivery.rules.event_type_filter (a subscription's other filter).
"""
