"""Owners, topics and endpoints with due rows, for the claim's tests; and what a plan read."""

from delivery.engine.accounts.subscribing import subscription_create, topic_create


def owner_with(django_user_model, name: str, endpoints: int):
    user = django_user_model.objects.create_user(name)
    topic, _ = topic_create(owner=user, name="t")
    for n in range(endpoints):
        subscription_create(topic=topic, endpoint=f"http://127.0.0.1:9/{name}/{n}")
    return user, topic


def endpoints_of(user, *names: str) -> dict:
    """A topic per name, each with its own endpoint; {name: (topic, endpoint id)}."""
    made = {}
    for name in names:
        topic, _ = topic_create(owner=user, name=name)
        subscription, _ = subscription_create(topic=topic, endpoint=f"http://127.0.0.1:9/{user.username}/{name}")
        made[name] = (topic, subscription.endpoint_id)
    return made


def flood_messages(cursor, topic_id: int, count: int, published_at: str) -> None:
    """`count` messages of the topic, the g-th (from 1) published at the SQL expression `published_at`."""
    cursor.execute(f"""INSERT INTO herald_delivery_message (id, topic_id, payload, payload_is_text, event_type,
                           subject, attributes, published_at, request_fingerprint, fanout_pending, fanout_skipped,
                           broadcast)
                       SELECT gen_random_uuid(), %s, '1', false, 'flood', '', '{{}}', {published_at}, '', false,
                              '{{}}', false
                       FROM generate_series(1, %s) g""", [topic_id, count])


def rows_read(node: dict) -> int:
    """Rows the scans of `node` and below produced or filtered out, over all their loops."""
    own = 0
    if "Scan" in node["Node Type"] and node["Node Type"] not in ("CTE Scan", "WorkTable Scan", "Function Scan"):
        own = (node.get("Actual Rows", 0) + node.get("Rows Removed by Filter", 0)) * node.get("Actual Loops", 1)
    return own + sum(rows_read(child) for child in node.get("Plans", []))

