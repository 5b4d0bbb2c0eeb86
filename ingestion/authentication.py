"""Authentication of game servers on the HTTP door: ``Authorization: Bearer <token>``.

- no ``Authorization`` header, or not a well-formed ``Bearer`` credential -> 401 with
  ``WWW-Authenticate: Bearer`` (the client must present a token);
- a token we do not know -> 401 as well (``error="invalid_token"``, RFC 6750): it is the
  credential that is wrong, and telling "unknown" from "deactivated" to an anonymous caller
  would only help someone guessing tokens;
- a known but deactivated token -> 403 (the caller is identified and refused: staff turned it
  off), decided by ``HasActiveGameServerToken``.
"""

from __future__ import annotations

from dataclasses import dataclass

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.views import APIView

from .models import GameServerToken
from .selectors import game_server_token_get
from .services import game_server_token_touch

REALM = "match-results"
# Tokens are "lbgs_" + 43 url-safe characters; anything much longer is not one of ours.
MAX_TOKEN_LENGTH = 200


@dataclass(frozen=True, slots=True)
class GameServer:
    """``request.user`` on the HTTP door: the game server a token belongs to."""

    token_id: int
    name: str

    @property
    def is_authenticated(self) -> bool:
        return True


class GameServerTokenAuthentication(BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[GameServer, GameServerToken] | None:
        header = get_authorization_header(request).split()
        if not header:
            return None
        if header[0].lower() != self.keyword.lower().encode():
            raise exceptions.AuthenticationFailed(
                "Authorization must be 'Bearer <token>'", code="invalid_request"
            )
        if len(header) != 2 or len(header[1]) > MAX_TOKEN_LENGTH:
            raise exceptions.AuthenticationFailed(
                "malformed Bearer credential: expected one token", code="invalid_request"
            )
        try:
            raw_token = header[1].decode("ascii")
        except UnicodeDecodeError as exc:
            raise exceptions.AuthenticationFailed(
                "the token must be ASCII", code="invalid_request"
            ) from exc
        token = game_server_token_get(raw_token=raw_token)
        if token is None:
            raise exceptions.AuthenticationFailed("unknown token", code="invalid_token")
        if token.is_active:
            game_server_token_touch(token=token)
        return GameServer(token_id=token.id, name=token.name), token

    def authenticate_header(self, request: Request) -> str:
        return f'{self.keyword} realm="{REALM}"'


class HasActiveGameServerToken(BasePermission):
    message = "this game-server token has been deactivated"

    def has_permission(self, request: Request, view: APIView) -> bool:
        token = request.auth
        if token is None:
            # No credential at all: DRF answers 401 with WWW-Authenticate.
            return False
        return isinstance(token, GameServerToken) and token.is_active


class GameServerTokenScheme(OpenApiAuthenticationExtension):
    """Documents the door's Bearer token in the OpenAPI schema (registered by subclassing)."""

    target_class = "ingestion.authentication.GameServerTokenAuthentication"
    name = "gameServerToken"

    def get_security_definition(self, auto_schema: object) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A game-server token created by staff in the admin (shown once).",
        }
