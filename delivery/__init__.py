"""Herald's delivery app. From code: `from delivery import publish` (see delivery/events.py)."""


def publish(*args, **kwargs):
    """`delivery.events.publish`, importable before Django's apps are loaded."""
    from delivery.events import publish as publish_event

    return publish_event(*args, **kwargs)
