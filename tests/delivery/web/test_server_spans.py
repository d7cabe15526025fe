"""web/server_spans: Django's routes as HTTP's semantic conventions name them."""

from delivery.web.server_spans import route_template


def test_routes_become_path_templates():
    assert route_template("api/^topics/(?P<pk>[^/.]+)/publish/$") == "/api/topics/{pk}/publish/"
    assert route_template("portal/<str:token>/subscriptions/<int:subscription_id>/") == \
        "/portal/{token}/subscriptions/{subscription_id}/"
    assert route_template("api/^topics/$") == "/api/topics/"
    assert route_template("") is None and route_template(None) is None
