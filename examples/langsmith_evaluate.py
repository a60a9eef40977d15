"""An agent in a LangSmith experiment, scored by personagraph's judges (openevals-style evaluators).

    .venv/bin/python -m examples.langsmith_evaluate        # offline: nothing uploaded, no API key needed

With a LangSmith dataset and ``LANGSMITH_API_KEY`` set, pass its name as ``data=``, a ``Client()`` as
``client=`` and drop ``upload_results=False`` to see the scores (0–1, the rubric score and the judge's
rationale) in the UI.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

from langsmith import Client, evaluate, tracing_context
from langsmith.schemas import Example, LangSmithInfo

from examples.function_agent import agent
from personagraph.evaluators import create_persona_judge

PERSONA = "A 70-year-old retired cowboy from Texas"
QUESTIONS = ["How do you get around town these days?", "What do you do when it rains all week?"]
JUDGE = os.environ.get("PERSONAGRAPH_EXAMPLE_JUDGE", "local:qwen2.5-coder-1.5b")  # or "openai:gpt-4o"


def target(inputs: dict[str, Any]) -> dict[str, str]:
    """The agent under test: a persona system prompt, then the example's question."""
    system = {"role": "system", "content": f"You are {inputs['persona']}. Stay in character."}
    # LangChain traces its chat model's call itself, and langsmith 0.15 sends that trace even under
    # upload_results=False: tracing off here keeps an offline experiment offline.
    with tracing_context(enabled=False):
        return {"output": agent([system, {"role": "user", "content": inputs["question"]}])}


def offline_client() -> Client:
    """A LangSmith client that opens no connection: ``evaluate`` asks its client for the server's settings
    (``GET /info``) even with ``upload_results=False``; this one is given them, and points nowhere."""
    return Client(api_url="http://langsmith.invalid", api_key="offline", info=LangSmithInfo())


def main(client: Any = None) -> list[dict[str, Any]]:
    """Runs the experiment and prints one line per question and rubric; returns the result rows (offline
    unless given a real ``client``)."""
    client = client or offline_client()
    dataset = uuid.uuid4()
    examples = [Example(id=uuid.uuid4(), dataset_id=dataset, inputs={"persona": PERSONA, "question": q})
                for q in QUESTIONS]
    judges = [create_persona_judge(judge=JUDGE),  # Persona Consistency
              create_persona_judge(rubric="linguistic_habits", judge=JUDGE)]
    results = evaluate(target, data=examples, evaluators=judges, upload_results=False, client=client)
    rows = list(results)
    for row in rows:
        for found in row["evaluation_results"]["results"]:
            print(f"{row['example'].inputs['question']!r} {found.key}: {found.score} — {found.comment}")
    return rows


if __name__ == "__main__":
    main()
