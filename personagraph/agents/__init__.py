"""Agents: the persona agent under test, and (later) simulated users and plug-in adapters."""

from personagraph.agents.base import Agent
from personagraph.agents.persona import PersonaAgent

__all__ = ["Agent", "PersonaAgent"]
