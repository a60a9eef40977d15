"""Keeping secrets out of reports: config keys that name a secret, credentials in URLs, key-like strings.

Run stores never hold API keys (the model layer does not write them); this is the second line of defence
for whatever a report or an export prints.
"""

from __future__ import annotations

import os
import re
from typing import Any

REDACTED = "[redacted]"
_SECRET_NAME = re.compile(
    r"(api[_-]?key|secret|passw(or)?d|authori[sz]ation|credential|(access|auth|bearer|refresh|session|id)[_-]?token"
    r"|^token$|private[_-]?key)",
    re.IGNORECASE,
)
_URL_CREDENTIALS = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)[^/@\s:]+(:[^/@\s]*)?@", re.IGNORECASE)
_KEY_LIKE = re.compile(r"\b(sk-[A-Za-z0-9_-]{16,}|sk-proj-[A-Za-z0-9_-]{16,}|Bearer\s+[A-Za-z0-9._-]{16,})")
_SECRET_ENV = re.compile(r"(API_KEY|TOKEN|SECRET|PASSWORD)", re.IGNORECASE)


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


def _env_secrets() -> list[str]:
    return [value for name, value in os.environ.items() if _SECRET_ENV.search(name) and len(value) >= 12]


def redact_text(text: str, extra: list[str] | tuple[str, ...] = ()) -> str:
    """Removes key-like strings, URL credentials and the values of secret environment variables."""
    for secret in [*_env_secrets(), *extra]:
        if secret and secret in text:
            text = text.replace(secret, REDACTED)
    text = _URL_CREDENTIALS.sub(lambda m: f"{m.group('scheme')}{REDACTED}@", text)
    return _KEY_LIKE.sub(REDACTED, text)
