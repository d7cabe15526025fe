"""Who may open a portal page, and the headers every answer under `/portal/` carries.

Every page lives under `/portal/<token>/`: the signed link is the credential, carried in the path rather than a
cookie, so the portal works inside an owner's iframe on another site (where browsers withhold third-party
cookies). For the same reason forms need no CSRF token: nothing ambient authenticates them, a forged form cannot
know the token. Pages are sent with `Referrer-Policy: no-referrer` (the token never leaves in a Referer header),
`Cache-Control: no-store`, and `frame-ancestors` from the owner's portal settings (none by default): every answer
under `/portal/`, a refused link's and a 404's too. Stored settings are read through their rules
(rules/portal_settings.py), so a value stored before a rule existed is left out, never a 500.

The pages work without JavaScript. One script, inline under a per-answer nonce (the CSP allows no other), adds what
needs it: copy buttons, the page's height told to a framing parent (`herald-portal:height`, docs/tenants.md), and a
page waiting on a delivery or a confirmation updating itself for up to two minutes.
"""

import secrets
from datetime import UTC, datetime
from functools import wraps

from django.http import Http404, HttpResponseRedirect
from django.shortcuts import render
from django.views.decorators.csrf import csrf_exempt

from delivery.conf import herald
from delivery.engine.accounts import tenancy
from delivery.rules import portal_settings
from delivery.web import selectors

READ_ONLY = "This link lets you look, not change anything."


def portal_page(view):
    """Resolve the link (403 page if it is forged or expired), refuse changes through a read-only link, and set
    the portal's headers on the answer."""

    @csrf_exempt
    @wraps(view)
    def wrapper(request, token, *args, **kwargs):
        nonce = secrets.token_urlsafe(16)
        try:
            access, expires = tenancy.portal_access(token)
        except tenancy.LinkRefused as refused:
            return _refused(request, refused, nonce)
        portal = selectors.portal_settings(access.owner_id)
        request.portal = {"access": access, "tenant": access.tenant, "token": token, "portal": portal,
                          "brand": portal_settings.brand_colour(portal.colour), "nonce": nonce,
                          "expires": datetime.fromtimestamp(expires, tz=UTC),
                          "read_only": access.read_only}
        if access.read_only and request.method == "POST":
            response = render(request, "herald/portal/refused.html", {"reason": READ_ONLY, **request.portal},
                              status=403)
        else:
            try:
                response = view(request, *args, **kwargs)
            except Http404:
                response = render(request, "herald/portal/refused.html", {
                    "title": "Not found", "reason": "There is no such page here.", **request.portal}, status=404)
        return _headers(response, portal, nonce)

    return wrapper


def _refused(request, refused: tenancy.LinkRefused, nonce: str):
    """A link Herald did not sign: a plain 403 page. A genuine link that expired: the owner's branded page saying so,
    linking to the owner's refresh URL and naming its host, for as long again as a link may live at most; a GET is
    redirected there only on a host the operator allowed (HERALD_PORTAL_REFRESH_HOSTS): the origin every owner
    shares is no open redirect."""
    if refused.owner_id is None:
        return _headers(render(request, "herald/portal/refused.html", {"reason": str(refused), "nonce": nonce},
                               status=403), None, nonce)
    portal = selectors.portal_settings(refused.owner_id)
    recently = refused.expired_for is not None and refused.expired_for <= herald.PORTAL_LINK_MAX_SECONDS
    refresh = portal_settings.refresh_url(portal.refresh_url) if recently else ""
    if refresh and request.method == "GET" and portal_settings.redirect_allowed(refresh, herald.PORTAL_REFRESH_HOSTS):
        return _headers(HttpResponseRedirect(refresh), portal, nonce)
    return _headers(render(request, "herald/portal/refused.html", {
        "title": "Link expired", "heading": "This link has expired", "reason": str(refused), "portal": portal,
        "fresh_link": refresh, "fresh_link_host": portal_settings.refresh_host(refresh) if refresh else "",
        "nonce": nonce, "brand": portal_settings.brand_colour(portal.colour)}, status=403), portal, nonce)


@portal_page
def not_found(request, rest: str = ""):
    """Any other path under a portal link: a 404 with the portal's headers."""
    raise Http404


def _headers(response, portal, nonce: str):
    ancestors = portal_settings.csp_frame_ancestors(portal.frame_ancestors if portal is not None else None)
    response["Content-Security-Policy"] = f"frame-ancestors {ancestors}; default-src 'self'; img-src 'self' https: " \
                                          f"data:; style-src 'self' 'unsafe-inline'; script-src 'nonce-{nonce}'; " \
                                          f"object-src 'none'; base-uri 'none'; form-action 'self'"
    response["Referrer-Policy"] = "no-referrer"
    response["Cache-Control"] = "no-store"
    if ancestors != "'none'":
        response.xframe_options_exempt = True  # CSP frame-ancestors decides
    return response
