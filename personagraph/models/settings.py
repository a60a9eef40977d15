"""Per-role model settings."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, SecretStr

StructuredMode = Literal["auto", "json_schema", "json_object", "prompt"]


class ModelSettings(BaseModel):
    """How one role calls its model. ``api_key`` is a secret: never stored, logged or reported."""

    temperature: float = Field(0.0, ge=0.0, le=2.0)
    max_tokens: int = Field(512, ge=1, le=32768)
    seed: int = 0
    concurrency: int = Field(8, ge=1, le=1024)
    timeout_s: float = Field(120.0, gt=0)
    max_retry_after_s: float = Field(60.0, ge=0)  # a server's Retry-After is obeyed up to this long
    retry_attempts: int = Field(6, ge=1, le=100)  # attempts per call at transient errors (1: no retry)
    base_url: str | None = None
    api_key: SecretStr | None = Field(default=None, exclude=True)
    structured: StructuredMode = "auto"

    def public(self) -> dict[str, object]:
        """The settings as recorded in a run (no secret)."""
        return self.model_dump(exclude={"api_key"})
