"""personagraph: simulate and evaluate LLM persona agents with LangGraph state machines."""

__version__ = "0.1.0"

__all__ = ["__version__"]
