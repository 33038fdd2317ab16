"""Who looks at the dashboard, and whether a form was sent by the dashboard.

A browser signs in with a bearer token of the API (``querator serve tokens
create``): the login form keeps it in a session cookie (HttpOnly,
SameSite=Strict, Secure over TLS, path ``/ui``), and every request is checked
by the API's own :class:`~querator.http.auth.TokenCheck` with the API's
scopes: ``read`` shows every page, ``write`` may act. A request may also carry
an ``Authorization: Bearer`` header, as API calls do. While no token is
stored the store is open (``querator serve`` then binds loopback only).

Every action is a POST that must carry the page's CSRF token (double submit:
a random HttpOnly cookie and the same value in the form, compared in constant
time) and, when the browser names one, an ``Origin`` of this very server; a
``Sec-Fetch-Site: cross-site`` request is refused outright.
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass
from urllib.parse import parse_qsl

from starlette.datastructures import FormData, UploadFile
from starlette.requests import Request
from starlette.responses import Response

from querator.errors import Forbidden, InvalidArgument
from querator.http.auth import TokenCheck

SESSION_COOKIE = "querator_session"
CSRF_COOKIE = "querator_csrf"
COOKIE_PATH = "/ui"
FORM_BYTES = 65_536
"""The largest form an action accepts."""
SESSION_SECONDS = 12 * 3600
"""How long a browser stays signed in (a revoked token ends it at once)."""


@dataclass(frozen=True)
class Viewer:
    """The person behind a request, as far as the dashboard cares."""

    can_write: bool
    """The token's scope allows actions (``write`` or ``admin``), or the store is open."""
    csrf: str
    """The CSRF token this browser's forms carry."""
    signed_in: bool
    """The request carried a token (False: the store has none, it is open)."""


def _authorization(request: Request) -> str | None:
    header = request.headers.get("authorization")
    if header:
        return header
    token = request.cookies.get(SESSION_COOKIE)
    return f"Bearer {token}" if token else None


async def viewer(request: Request, tokens: TokenCheck) -> Viewer:
    """The viewer of ``request``: Unauthorized without a valid token (when tokens
    exist), Forbidden when its scope cannot read."""
    header = _authorization(request)
    await tokens.check(header, "read")
    try:
        await tokens.check(header, "write")
        can_write = True
    except Forbidden:
        can_write = False
    csrf = request.cookies.get(CSRF_COOKIE) or secrets.token_urlsafe(32)
    return Viewer(can_write=can_write, csrf=csrf, signed_in=header is not None)


async def writer(request: Request, tokens: TokenCheck, form: FormData) -> Viewer:
    """The viewer of an action: refused (Forbidden) unless the form is the
    dashboard's own (:func:`check_origin`) and the token may write."""
    check_origin(request, form)
    header = _authorization(request)
    await tokens.check(header, "write")
    return Viewer(can_write=True, csrf=str(form.get("csrf")), signed_in=header is not None)


async def read_form(request: Request) -> FormData:
    """The request's ``application/x-www-form-urlencoded`` body (every dashboard
    form is one), at most :data:`FORM_BYTES`; also kept as ``request.state.form``."""
    kind = request.headers.get("content-type", "").split(";")[0].strip()
    if kind != "application/x-www-form-urlencoded":
        raise InvalidArgument("content-type", f"must be a form (urlencoded), got {kind!r}")
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > FORM_BYTES:
            raise InvalidArgument("form", f"must be at most {FORM_BYTES} bytes")
    fields: list[tuple[str, str | UploadFile]] = []
    fields += parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True)
    form = FormData(fields)
    request.state.form = form
    return form


def _own_origin(request: Request) -> str:
    return f"{request.url.scheme}://{request.headers.get('host', '')}"


def check_origin(request: Request, form: FormData) -> None:
    """Forbidden unless the POST comes from this server's own page: same
    ``Origin`` (when sent), not ``Sec-Fetch-Site: cross-site``, and the form's
    ``csrf`` field equal to the browser's CSRF cookie."""
    origin = request.headers.get("origin")
    if origin is not None and origin != _own_origin(request):
        raise Forbidden(f"cross-site request refused (origin {origin})")
    if request.headers.get("sec-fetch-site") == "cross-site":
        raise Forbidden("cross-site request refused")
    cookie = request.cookies.get(CSRF_COOKIE, "")
    sent = form.get("csrf")
    if not cookie or not isinstance(sent, str) or not hmac.compare_digest(cookie, sent):
        raise Forbidden("missing or wrong CSRF token: reload the page and try again")


def _secure(request: Request) -> bool:
    return request.url.scheme == "https"


def keep_csrf(response: Response, request: Request, csrf: str) -> None:
    """Set the CSRF cookie of ``csrf`` on ``response`` when the browser lacks it."""
    if request.cookies.get(CSRF_COOKIE) == csrf:
        return
    response.set_cookie(
        CSRF_COOKIE, csrf, max_age=SESSION_SECONDS, path=COOKIE_PATH,
        secure=_secure(request), httponly=True, samesite="strict",
    )  # fmt: skip


def sign_in(response: Response, request: Request, token: str) -> None:
    """Keep ``token`` (already checked) as the browser's session."""
    response.set_cookie(
        SESSION_COOKIE, token, max_age=SESSION_SECONDS, path=COOKIE_PATH,
        secure=_secure(request), httponly=True, samesite="strict",
    )  # fmt: skip


def sign_out(response: Response) -> None:
    """Forget the browser's session."""
    response.delete_cookie(SESSION_COOKIE, path=COOKIE_PATH)
