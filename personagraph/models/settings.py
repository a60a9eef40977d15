"""Per-role model settings, and the named endpoints a run may send ``openai@NAME:`` specs to."""

from __future__ import annotations

import re
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from personagraph.errors import PersonagraphError

StructuredMode = Literal["auto", "json_schema", "json_object", "prompt"]
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_URL_SECRET = re.compile(r"[@?#]")  # where a URL may carry a password or a key
DEFAULT_TIMEOUT_S = 60.0
"""How long one attempt at an API endpoint waits for its reply (``--timeout``); a reply that takes longer is a
transient fault, retried. A hosted model answers a persona turn or a verdict in seconds; 120 s per attempt,
times 6 attempts, let one stalled connection hold a run for 12 minutes."""
MAX_TIMEOUT_S = 3600.0
MAX_CONCURRENCY = 4096
"""The most calls, personas or sessions any run keeps in flight (``--concurrency``, an endpoint's
``concurrency=``): twice the largest level ``bench/throughput.py`` measures, a bound a mistyped value meets
before it opens that many sockets."""


class Endpoint(BaseModel):
    """A named OpenAI-compatible endpoint: its URL, the environment variable holding its key (the key
    itself is read when a client is made and never stored) and how many requests it takes at once."""

    name: str = Field(pattern=_NAME.pattern)
    url: str = Field(pattern=r"^https?://")
    key_env: str | None = Field(None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")  # an environment variable's name
    concurrency: int | None = Field(None, ge=1, le=MAX_CONCURRENCY)

    @field_validator("url")
    @classmethod
    def _port(cls, value: str) -> str:
        return checked_url(value)


def checked_url(url: str) -> str:
    """``url`` when every request can be sent to it; else a ValueError saying why: a port no server can listen
    on (not 1-65535), a user name or password in it (the key goes in a header, and the HTTP client refuses
    both at once) or a query or fragment (requests append ``/chat/completions`` to the path). The URL is not
    repeated where it may hold a secret."""
    parts = urlsplit(url)
    try:
        port = parts.port  # a ValueError when it is out of range or not a number
    except ValueError:
        port = 0
    if parts.username is not None or parts.password is not None:
        raise ValueError("the URL holds a user name or password; give the key with --api-key or key-env=VAR")
    if parts.query or parts.fragment or url.rstrip().endswith(("?", "#")):
        raise ValueError("the URL holds a query or fragment (?…, #…); requests append /chat/completions to its "
                         "path — give the key with --api-key or key-env=VAR")
    if port == 0:
        raise ValueError(f"{url!r}: the port is not a number from 1 to 65535")
    return url


def parse_endpoint(text: str) -> Endpoint:
    """Parses ``NAME=URL[,key-env=VAR][,concurrency=N]`` (the ``--endpoint`` option).

    Raises:
        PersonagraphError: naming the text and what is wrong with it.
    """
    name, sep, rest = text.strip().partition("=")
    url, *options = rest.split(",")
    fields: dict[str, Any] = {"name": name, "url": url.strip()}
    usage = "expected NAME=URL[,key-env=VAR][,concurrency=N]"
    for option in options:
        key, has_value, value = option.strip().partition("=")
        if key not in ("key-env", "concurrency") or not has_value:
            raise PersonagraphError(f"endpoint {text!r}: unknown option {option.strip()!r}; {usage}")
        fields[key.replace("-", "_")] = value.strip()
    if not sep or not _NAME.fullmatch(name):
        raise PersonagraphError(f"endpoint {text!r}: {usage} (NAME: letters, digits, '_', '.', '-')")
    try:
        return Endpoint(**fields)
    except ValueError as exc:
        first = exc.errors()[0]  # type: ignore[attr-defined]
        reason = first["msg"].removeprefix("Value error, ")
        shown = f"{name}=…" if _URL_SECRET.search(text) else text  # a URL with a password or query may hold a key
        raise PersonagraphError(f"endpoint {shown!r}: {first['loc'][0]}: {reason}; {usage}") from None


class ModelSettings(BaseModel):
    """How one role calls its model. ``api_key`` is a secret: never stored, logged or reported.

    ``endpoints``: the named endpoints of ``openai@NAME:model`` specs (:class:`Endpoint` objects or
    ``NAME=URL[,key-env=VAR][,concurrency=N]`` strings).
    """

    model_config = ConfigDict(allow_inf_nan=False)  # NaN passes every bound check: refused as not finite

    temperature: float = Field(0.0, ge=0.0, le=2.0)
    max_tokens: int = Field(512, ge=1, le=32768)
    seed: int = 0
    concurrency: int = Field(8, ge=1, le=MAX_CONCURRENCY)
    timeout_s: float = Field(DEFAULT_TIMEOUT_S, gt=0, le=MAX_TIMEOUT_S)  # per attempt at an API endpoint
    max_retry_after_s: float = Field(60.0, ge=0)  # a server's Retry-After is obeyed up to this long
    retry_attempts: int = Field(6, ge=1, le=100)  # attempts per call at transient errors (1: no retry)
    retry_permanent: bool = False  # a stored structured reply that never validated is asked again, past the cache
    base_url: str | None = None  # an OpenAI-compatible endpoint: http(s)://host[:port]/…
    api_key: SecretStr | None = Field(default=None, exclude=True)
    structured: StructuredMode = "auto"
    endpoints: list[Endpoint] = Field(default_factory=list)

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"https?://[^\s/]+", value):
            raise ValueError(f"{value!r} is not an http(s)://host[:port]/… URL")
        return value if value is None else checked_url(value)

    @field_validator("endpoints", mode="before")
    @classmethod
    def _parse_endpoints(cls, value: Any) -> Any:
        items = [parse_endpoint(v) if isinstance(v, str) else v for v in value or ()]
        names = [item.name if isinstance(item, Endpoint) else dict(item).get("name") for item in items]
        if len(set(names)) < len(names):
            raise PersonagraphError(
                f"endpoints: {sorted({n for n in names if names.count(n) > 1})} defined twice"
            )
        return items

    def endpoint(self, name: str) -> Endpoint | None:
        """The named endpoint, or None."""
        return next((e for e in self.endpoints if e.name == name), None)

    def shared_by(self, parts: int) -> ModelSettings:
        """These settings for one of ``parts`` processes sharing every limit (Ray tasks): the concurrency and
        each endpoint's concurrency divided among them (at least 1 each)."""
        endpoints = [
            e.model_copy(update={"concurrency": max(1, e.concurrency // parts)}) if e.concurrency else e
            for e in self.endpoints
        ]
        return self.model_copy(
            update={"concurrency": max(1, self.concurrency // parts), "endpoints": endpoints}
        )

    def public(self) -> dict[str, object]:
        """The settings as recorded in a run (no secret; an endpoint's key only as its variable's name)."""
        return self.model_dump(exclude={"api_key"})
