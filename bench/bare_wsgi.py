"""A WSGI application that answers `{}` to every request: gunicorn's own cost per request, and the kernel's, with no
Django behind it (`scenarios.py --only web-floor`)."""


def application(environ, start_response):
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", "2")])
    return [b"{}"]
