"""Oversized request bodies answered so the client can read the answer.

A body over DATA_UPLOAD_MAX_MEMORY_SIZE is refused before the view runs: the middleware reads and discards the rest
of it (up to `DRAIN_LIMIT_BYTES`) and then answers a JSON 413 naming the limit. Answering while the client is still
sending, and closing the connection with the body unread, would reset the connection under the client, who would
see "connection closed without response" instead of the 413. Past the drain bound, the 413 goes out at once and the
server closes the connection (reading gigabytes to be polite is a cost an attacker controls).
"""

from django.conf import settings
from django.http import JsonResponse

DRAIN_LIMIT_BYTES = 64 * 1024 * 1024
CHUNK = 64 * 1024


class OversizedBodyMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if limit is None or length <= limit:
            return self.get_response(request)
        answer = JsonResponse({"detail": f"The request body is larger than {limit} bytes."}, status=413)
        if length > DRAIN_LIMIT_BYTES:
            return answer
        stream, left = request.META.get("wsgi.input"), length
        while stream is not None and left > 0:
            chunk = stream.read(min(CHUNK, left))
            if not chunk:
                break
            left -= len(chunk)
        return answer
