"""The endpoints' signing secrets, encrypted at rest.

A webhook is signed with HMAC-SHA256 keyed by the endpoint's secret, so the deliverer needs the
secret itself: a one-way hash (as for game-server tokens) could not sign anything. The secret is
encrypted with Fernet (AES-128-CBC and HMAC-SHA256: a tampered or wrongly keyed value fails to
decrypt instead of giving garbage) under keys that live in the settings, never in the database:
a database dump or backup alone does not reveal any secret.

``WEBHOOK_SECRET_KEYS`` lists Fernet keys: the first encrypts, each one decrypts, so a key is
rotated by putting the new one first and re-encrypting (``manage.py create_webhook`` and the
admin always write with the first). Empty, one key is derived from ``DJANGO_SECRET_KEY``
(SHA-256 of a label and the key): fine for the demo, but then changing the Django secret makes
the stored secrets unreadable, so production sets its own keys.
"""

from __future__ import annotations

import base64
import hashlib
import secrets

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

# Generated secrets carry this prefix, so one found in a log or a paste is recognisable.
SECRET_MARKER = "whsec_"  # noqa: S105 -- a recognisable prefix, not a secret


class SecretUnreadable(Exception):
    """A stored secret that none of WEBHOOK_SECRET_KEYS decrypts (a key was removed)."""


def _fernet() -> MultiFernet:
    keys = [key.strip() for key in settings.WEBHOOK_SECRET_KEYS if key.strip()]
    if not keys:
        digest = hashlib.sha256(b"leaderboard webhook secrets\0" + settings.SECRET_KEY.encode())
        keys = [base64.urlsafe_b64encode(digest.digest()).decode()]
    try:
        return MultiFernet([Fernet(key) for key in keys])
    except ValueError as exc:
        raise ImproperlyConfigured(f"WEBHOOK_SECRET_KEYS: not a Fernet key ({exc})") from None


def secret_generate() -> str:
    """A new random signing secret (256 bits)."""
    return SECRET_MARKER + secrets.token_urlsafe(32)


def secret_encrypt(secret: str) -> str:
    return _fernet().encrypt(secret.encode()).decode("ascii")


def secret_decrypt(token: str) -> str:
    try:
        return _fernet().decrypt(token.encode("ascii")).decode()
    except InvalidToken:
        raise SecretUnreadable(
            "the endpoint's secret cannot be decrypted with WEBHOOK_SECRET_KEYS "
            "(was a key removed or DJANGO_SECRET_KEY changed?); set a new secret"
        ) from None
