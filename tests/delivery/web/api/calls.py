"""Calls the API tests make to set up: a topic, a subscription (asserting they were made)."""


def create_topic(api, name="orders", **extra):
    response = api.post("/api/topics/", {"name": name, **extra}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def create_subscription(api, topic_id, url="http://127.0.0.1:9/hook", **extra):
    response = api.post("/api/subscriptions/", {"topic": topic_id, "endpoint": url, **extra}, format="json")
    assert response.status_code == 201, response.content
    return response.json()
