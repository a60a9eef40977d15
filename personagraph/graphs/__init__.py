"""LangGraph StateGraphs. They only wire: prompts, model calls and scoring live in the other rooms."""
