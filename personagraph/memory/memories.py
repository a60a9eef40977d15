"""A memory: one remembered event of one user, the record the bank stores and recall ranks.

Its own module so that recall (which ranks memories) does not import the bank it reads from: the bank
hands out a recall-backed retriever (:meth:`~personagraph.memory.bank.MemoryBank.as_retriever`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

DocumentFormat = Literal["event", "madial"]


class Memory(BaseModel):
    """One remembered event of one user."""

    id: str
    user_id: str
    time: str = ""
    scene: str = ""
    emotion: str = ""
    event: str
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("id", "user_id", mode="before")
    @classmethod
    def _as_text(cls, value: Any) -> Any:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(int(value)) if float(value).is_integer() else str(value)
        return value

    @field_validator("id", "user_id", "event")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value

    def madial_dict(self) -> dict[str, str]:
        """The memory as MADial stores it: ``{"time", "scene", "emotion", "event"}``."""
        return {"time": self.time, "scene": self.scene, "emotion": self.emotion, "event": self.event}

    def document(self, fmt: DocumentFormat = "event") -> str:
        """The text that gets embedded: the event alone, or MADial's ``str(dict)`` of all four fields."""
        return self.event if fmt == "event" else str(self.madial_dict())
