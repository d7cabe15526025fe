"""One SERVER span per HTTP request of Herald's web process, when tracing is on (delivery/engine/plumbing/tracing.py):
method, route, status and server address by HTTP's semantic conventions, the caller's `traceparent` its parent,
and the publish's span its child. Herald's own project lists this middleware first; a host project whose own
OpenTelemetry instrumentation already makes a span per request needs none (this one then makes nothing).

Costs nothing when tracing is off: one attribute read per request.
"""

import re

from delivery.engine.plumbing import tracing

GROUP = re.compile(r"\(\?P<(\w+)>[^)]*\)")  # a regex route's named group: `(?P<pk>[^/.]+)`
CONVERTER = re.compile(r"<(?:\w+:)?(\w+)>")  # a path() route's converter: `<int:pk>`


def route_template(route: str | None) -> str | None:
    """A Django route as HTTP's semantic conventions want `http.route`: `/api/topics/{pk}/publish/`."""
    if not route:
        return None
    template = CONVERTER.sub(r"{\1}", GROUP.sub(r"{\1}", route.replace("^", "").replace("$", "")))
    return "/" + template.lstrip("/")


class ServerSpanMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if not tracing.on():
            return self.get_response(request)
        attributes = {"url.scheme": request.scheme, "url.path": request.path, "server.address": request.get_host(),
                      "user_agent.original": request.headers.get("User-Agent")}
        with tracing.serving(request.method, attributes, request.headers.get("traceparent")) as span:
            response = self.get_response(request)
            match = getattr(request, "resolver_match", None)
            tracing.served(span, route_template(match.route if match else None), response.status_code)
            return response
