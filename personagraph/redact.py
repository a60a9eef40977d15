"""Keeping secrets out of everything stored or printed: secret-named keys, URL credentials, key-like strings.

The one scrubber: the model layer passes every error it makes through :func:`redact_text` (a 401 body
may echo the API key), the CLI scrubs every line it prints, reports scrub what they render. Secrets are
found by shape (``sk-…``, ``Bearer …``, ``user:pw@`` in URLs), as the values of secret-named environment
variables, and as values this process was handed (:func:`register_secret`, e.g. ``--api-key``).
"""

from __future__ import annotations

import base64
import os
import re
from typing import Any

REDACTED = "[redacted]"
_SECRET_NAME = re.compile(
    r"(api[_-]?key|secret|passw(or)?d|authori[sz]ation|credential|(access|auth|bearer|refresh|session|id)[_-]?token"
    r"|^token$|private[_-]?key)",
    re.IGNORECASE,
)
# Every pattern runs in linear time: each starts at a fixed literal ("://", "sk-", "Bearer"), so no letter run
# is rescanned from every offset. (The scheme used to be matched as ``[a-z][a-z0-9+.-]*://``, which the engine
# retried at every start in a run of letters: quadratic, 5.8 s for 40 KB of "a", and a 5 MB answer froze
# ``report``.) One character of scheme before "://" is enough to know a URL; the scheme itself is kept.
_URL_CREDENTIALS = re.compile(r"://(?<=[a-z0-9+.-]://)[^/@\s:]+(?::[^/@\s]*)?@", re.IGNORECASE)
_KEY_LIKE = re.compile(r"\b(?:sk-[A-Za-z0-9_-]{16,}|Bearer\s{1,8}[A-Za-z0-9._-]{16,})")
_SECRET_ENV = re.compile(r"(API_KEY|TOKEN|SECRET|PASSWORD)", re.IGNORECASE)
_registered: set[str] = set()
MIN_SECRET_CHARS = 8  # shorter values (e.g. "none", "x") would redact ordinary words


def is_secret_name(name: str) -> bool:
    """Whether a config key names a secret (``api_key``, ``password``, ``auth_token``, …)."""
    return bool(_SECRET_NAME.search(name))


def scrub(value: Any) -> Any:
    """A copy of a JSON-like value with secret-named keys redacted and credentials removed from strings."""
    if isinstance(value, dict):
        return {
            key: (REDACTED if is_secret_name(str(key)) and item not in (None, "") else scrub(item))
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [scrub(item) for item in value]
    if isinstance(value, str):
        return redact_text(value)
    return value


def _encodings(value: str) -> set[str]:
    """``value`` and the forms an endpoint may echo it in: base64 of the key and of its ``Bearer`` header, cut
    to whole 3-byte groups (the last group's characters depend on what follows in a longer encoded text)."""
    forms = {value}
    for plain in (value.encode(), f"Bearer {value}".encode()):
        forms.add(base64.b64encode(plain[: len(plain) // 3 * 3]).decode())
    return {form for form in forms if len(form) >= MIN_SECRET_CHARS}


def register_secret(value: str | None) -> None:
    """Remembers a secret this process was given (an API key from a flag) so that it is redacted too, also
    base64-encoded (a server that echoes the Authorization header encoded)."""
    if value and len(value) >= MIN_SECRET_CHARS:
        _registered.update(_encodings(value))


def redact_known(text: str) -> str:
    """``text`` without the secrets this process was handed (:func:`register_secret`): the cheap scrub of every
    model reply before it is stored (an endpoint may echo the key in a completion)."""
    for secret in sorted(_registered, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


def _env_secrets() -> list[str]:
    return [value for name, value in os.environ.items() if _SECRET_ENV.search(name) and len(value) >= 12]


def redact_text(text: str, extra: list[str] | tuple[str, ...] = ()) -> str:
    """Removes key-like strings, URL credentials, secret environment variables' and registered values."""
    for secret in sorted({*_env_secrets(), *_registered, *extra}, key=len, reverse=True):
        if secret and secret in text:
            text = text.replace(secret, REDACTED)
    if "@" in text and "://" in text:  # no credentials without both (a cheap test before any scan)
        text = _URL_CREDENTIALS.sub(f"://{REDACTED}@", text)
    if "sk-" in text or "Bearer" in text:
        text = _KEY_LIKE.sub(REDACTED, text)
    return text
