"""The simplest plug-in: a LangChain chat model object.

Replace ``model`` with any chat model (``ChatOpenAI(model="gpt-4o-mini")``, ``ChatOllama(...)``, …);
personagraph sends it the persona system prompt and the conversation and reads the reply's content.

    personagraph simulate --persona "A 70-year-old retired cowboy" --agent examples.chat_model_agent:model
"""

from __future__ import annotations

from examples._model import chat_model

model = chat_model()
