"""Herald's delivery app. Publishing from code: `delivery.events.publish` (docs/embedding.md)."""
