"""The form of the questions the embedded question writer produces: cut off, several in one, how long.

Every PersonaGym task's question is written by the generator model (``environments/questions.py``). A
question that reaches the length cap of its JSON schema (``schemas.QUESTION_MAX_CHARS``) was cut off by
llama.cpp's grammar mid-sentence, and a question that asks four things draws an answer that runs to the
answer cap, which the judge then reads. This bench writes the quick run's questions (1 per task, the 3
environments nearest the persona, no selector call) for personas the question prompts were not written
on (``judges/contrast_personas.yaml``) and prints, for the replies as written and for the questions the
run keeps (``environments/questions.question_as_asked``): how many were cut at the cap, how many ask more
than one question (more than one "?"), their length, and the tokens and seconds per call, beside the
machine line.

    .venv/bin/python bench/question_form.py                 # 8 personas x 5 tasks, every call afresh
    .venv/bin/python bench/question_form.py --personas 16 --per-task 2

The last line: ``questions <n> cut_at_cap <share> kept_unended <share> several_asked <share> words <mean>
prompt_tokens_per_call <n> generated_tokens_per_call <n> s_per_call <s>`` (the wall seconds over the calls,
which overlap).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._harness import load_average, machine, wilson_share  # noqa: E402
from personagraph.environments import generate_questions, load_tasks  # noqa: E402
from personagraph.environments.questions import ends_a_sentence, shortlist_pool  # noqa: E402
from personagraph.models import ModelClient, ModelSettings  # noqa: E402
from personagraph.models.openai_http import close_sessions  # noqa: E402
from personagraph.schemas import QUESTION_MAX_CHARS  # noqa: E402
from personagraph.store import RunStore  # noqa: E402

PERSONAS = Path(__file__).resolve().parents[1] / "personagraph" / "judges" / "contrast_personas.yaml"
GENERATOR = "local:qwen2.5-coder-1.5b"


def several_asked(question: str) -> bool:
    """More than one question in one: more than one question mark."""
    return question.count("?") > 1


async def write_all(generator: str, personas: list[str], per_task: int, concurrency: int, store: RunStore,
                    base_url: str | None) -> tuple[list[str], list[str], float]:
    """The questions kept for every persona and task, the failures, and the wall seconds of the calls."""
    settings = ModelSettings(base_url=base_url, concurrency=concurrency, seed=0, temperature=0.7,
                             max_tokens=96 * per_task + 64, timeout_s=600)  # the eval's question_gen role
    client = ModelClient.create(generator, "question_gen", store=store, settings=settings)
    tasks = load_tasks()
    started = time.perf_counter()
    batches = await asyncio.gather(*(
        generate_questions(client, persona, task, list(shortlist_pool(persona, 3)), per_task)
        for persona in personas for task in tasks
    ))
    seconds = time.perf_counter() - started
    kept = [q for batch in batches for q in batch.questions]
    failures = [batch.error for batch in batches if batch.error]
    return kept, failures, seconds


def report(written: list[str], kept: list[str], calls: list[Any], wall: float) -> list[str]:
    """The lines printed: the questions as written (cut at the cap) and as kept, tokens and seconds per call;
    the last line is the machine-readable one."""
    cut = [q for q in written if len(q) >= QUESTION_MAX_CHARS]
    unended = [q for q in kept if not ends_a_sentence(q)]
    several = [q for q in kept if several_asked(q)]
    words = [len(q.split()) for q in kept] or [0]
    prompt = float(np.mean([row.input_tokens or 0 for row in calls])) if calls else 0.0
    generated = float(np.mean([row.output_tokens or 0 for row in calls])) if calls else 0.0
    per_call = wall / max(1, len(calls))  # the calls overlap: a call's latency includes its wait for a slot
    n_written, n_kept = max(1, len(written)), max(1, len(kept))
    return [
        f"as written: {len(written)} questions; cut at the {QUESTION_MAX_CHARS}-character cap: "
        f"{wilson_share(len(cut), len(written))}; asking several things: "
        f"{wilson_share(sum(map(several_asked, written)), len(written))}",
        f"kept: {len(kept)} questions; not ending a sentence: {wilson_share(len(unended), len(kept))}; "
        f"asking several things: {wilson_share(len(several), len(kept))}",
        f"words per kept question: mean {np.mean(words):.1f}, median {np.median(words):.0f}, "
        f"max {max(words)}",
        *(f"  unended: …{question[-70:]}" for question in unended[:3]),
        f"per call: {prompt:.0f} prompt tokens, {generated:.1f} generated, {per_call:.1f} s of the wall "
        f"(load average {load_average()} at the end)",
        f"questions {len(kept)} cut_at_cap {len(cut) / n_written:.3f} "
        f"kept_unended {len(unended) / n_kept:.3f} several_asked {len(several) / n_kept:.3f} "
        f"words {np.mean(words):.1f} prompt_tokens_per_call {prompt:.0f} "
        f"generated_tokens_per_call {generated:.1f} s_per_call {per_call:.1f}",
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--personas", type=int, default=8, help="the first N of contrast_personas.yaml")
    parser.add_argument("--per-task", type=int, default=1, help="questions per task (the quick run: 1)")
    parser.add_argument("--concurrency", type=int, default=4, help="calls in flight (the engine's slots: 4)")
    parser.add_argument("--generator", default=GENERATOR, help=f"the question writer (default {GENERATOR})")
    parser.add_argument("--base-url", help="an OpenAI-compatible server instead of the embedded engine")
    args = parser.parse_args(argv)
    personas = yaml.safe_load(PERSONAS.read_text(encoding="utf-8"))["personas"][: args.personas]
    print(machine())
    with tempfile.TemporaryDirectory() as scratch:
        store = RunStore(Path(scratch))
        try:
            kept, failures, wall = asyncio.run(write_all(args.generator, personas, args.per_task,
                                                         args.concurrency, store, args.base_url))
            calls = [row for row, _ in store.calls(model=args.generator)]
        finally:
            asyncio.run(close_sessions())
            store.close()
    written = [q for row in calls for q in json.loads(row.text or "{}").get("questions", [])]
    print(f"{len(personas)} personas x {len(load_tasks())} tasks x {args.per_task}: {len(calls)} calls "
          f"in {wall:.1f} s wall, {len(failures)} tasks with an error {failures[:3]}")
    print("\n".join(report(written, kept, calls, wall)))


if __name__ == "__main__":
    main()
