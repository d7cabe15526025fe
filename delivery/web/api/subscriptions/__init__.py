"""The subscriptions' API, in two modules: `views.py`, the view set (create, change, delete, and the actions:
confirm, rotate the secret, redrive, recover, replay, pause and resume, a test event, a transformation's test-run),
and `shapes.py`, what it takes and shows (a subscription, its secret shown once, and each action's body and answer)."""
