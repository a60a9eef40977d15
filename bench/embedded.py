"""Embedded models: tokens/s through personagraph against raw llama-cpp-python on the same prompts, and
how much of each prompt llama.cpp's prefix cache reuses.

Judge prompts put the static rubric first (system message), so consecutive judge calls on one model
share a long token prefix that llama.cpp does not evaluate again. When one model plays several roles
(generator and judge are the same model by default), calls of other roles come in between and the
in-context prefix is lost; ``Llama.set_cache(LlamaRAMCache(...))`` keeps saved states to restore from.
This script measures both. Target: personagraph ≥ 0.9× raw tokens/s.

    .venv/bin/python bench/embedded.py [--model qwen2.5-coder-0.5b] [--items 6] [--repeats 2]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PERSONAS = ("A 70-year-old retired cowboy from Texas", "A 36-year-old environmental lawyer from Sydney",
            "A 19-year-old chess player from Chennai", "A 52-year-old night-shift nurse from Glasgow")
QUESTIONS = ("What do you do when a storm hits during a long trip?", "How do you settle an argument?",
             "Describe your ideal weekend.", "What would you say to someone who insults your work?")
ANSWERS = ("Well, I'd batten down and wait it out with the horses.", "I listen first, then I speak plain.",
           "Out on the range at dawn, coffee on the fire.", "I'd tell them to mind their own business, politely.")


class PrefixMeter:
    """Counts prompt tokens and the tokens llama.cpp actually evaluated (the rest came from a cache)."""

    def __init__(self, llama: Any) -> None:
        self.llama = llama
        self.prompt_tokens = 0
        self.evaluated = 0
        self.generated = 0
        self._eval = llama.eval

        def counting_eval(tokens: Any) -> Any:
            self.evaluated += len(tokens)
            return self._eval(tokens)

        llama.eval = counting_eval

    def add(self, usage: dict[str, int]) -> None:
        self.prompt_tokens += usage.get("prompt_tokens", 0)
        self.generated += usage.get("completion_tokens", 0)

    def reset(self) -> None:
        self.prompt_tokens = self.evaluated = self.generated = 0

    @property
    def hit_rate(self) -> float:
        # every generated token but the last is fed back through eval one at a time
        prompt_evaluated = max(0, self.evaluated - max(0, self.generated - 1))
        return 1 - prompt_evaluated / self.prompt_tokens if self.prompt_tokens else 0.0


def judge_prompts(n: int) -> list[tuple[list[dict[str, str]], str]]:
    """(messages, task key) of n judge calls: the packaged judge prompt, rubric first."""
    from personagraph.environments import load_tasks
    from personagraph.judges.rubrics import load_rubric
    from personagraph.prompts import load_prompt

    tasks = load_tasks()
    out = []
    for i in range(n):
        task = tasks[(i // 2) % len(tasks)]  # two items per task in a row: the rubric prefix repeats
        rubric = load_rubric(task.rubric)
        out.append((load_prompt("judge").messages(
            task=rubric.task, rubric=rubric.text(), persona=PERSONAS[i % 4], question=QUESTIONS[i % 4],
            exemplars="(no examples available: rely on the rubric alone)", answer=ANSWERS[(i + 1) % 4],
            low=1, high=5), task.rubric))
    return out


def exemplar_prompt(i: int) -> list[dict[str, str]]:
    from personagraph.environments import load_tasks
    from personagraph.judges.rubrics import load_rubric
    from personagraph.prompts import load_prompt

    task = load_tasks()[i % 5]
    return load_prompt("exemplars").messages(task=task.name, rubric=load_rubric(task.rubric).text(),
                                             persona=PERSONAS[i % 4], question=QUESTIONS[i % 4])


async def main(model: str, items: int, max_tokens: int, repeats: int) -> None:
    from personagraph.models import ModelClient
    from personagraph.models.client import format_instructions
    from personagraph.models.local import load_llama
    from personagraph.schemas import ExemplarSet, JudgeReply

    client = ModelClient.create(f"local:{model}", "judge", temperature=0.0, max_tokens=max_tokens)
    llama = load_llama(model)
    meter = PrefixMeter(llama)
    response_format = client._response_format(JudgeReply)

    def as_sent(messages: list[dict[str, str]], schema: type = JudgeReply) -> list[dict[str, str]]:
        prompt = [dict(m) for m in messages]
        prompt[-1]["content"] = f"{prompt[-1]['content']}\n\n{format_instructions(schema)}"
        return prompt

    def raw(messages: list[dict[str, str]], fmt: dict | None = response_format) -> dict[str, int]:
        reply = llama.create_chat_completion(messages=messages, response_format=fmt, temperature=0.0,
                                             max_tokens=max_tokens, seed=0)
        return reply["usage"]

    prompts = judge_prompts(items)
    raw(as_sent(exemplar_prompt(99), ExemplarSet))  # warm-up, and a different prefix before each mode
    print(f"embedded: local:{model}, {items} judge prompts (rubric first), max_tokens {max_tokens}, "
          f"temperature 0, one inference at a time")

    # raw llama-cpp-python and personagraph, on the same prompts in the same order, alternated
    # ``repeats`` times; the best tok/s of each is kept (other load on the machine only slows a run down)
    results: dict[str, tuple[float, float, float, int]] = {}
    for mode in ("raw", "personagraph") * repeats:
        raw(as_sent(exemplar_prompt(98), ExemplarSet))  # break the prefix between modes
        meter.reset()
        started = time.perf_counter()
        for messages, _ in prompts:
            if mode == "raw":
                meter.add(raw(as_sent(messages)))
            else:
                before = dict(client.meter.output_tokens), dict(client.meter.input_tokens)
                reply = await client.structured(messages, JudgeReply)
                meter.add({"prompt_tokens": client.meter.input_tokens.get("judge", 0) - before[1].get("judge", 0),
                           "completion_tokens": client.meter.output_tokens.get("judge", 0)
                           - before[0].get("judge", 0)})
                assert reply.ok or reply.raw, reply.error
        wall = time.perf_counter() - started
        if mode not in results or meter.generated / wall > results[mode][0]:
            results[mode] = (meter.generated / wall, meter.hit_rate, wall, meter.generated)
        print(f"  {mode:>12}: {meter.generated} tokens in {wall:.1f}s = {meter.generated / wall:.2f} tok/s, "
              f"prefix-cache hit rate {meter.hit_rate:.0%} of {meter.prompt_tokens} prompt tokens")

    # one model, several roles: judge calls interleaved with exemplar calls, without and with a RAM cache
    from llama_cpp import LlamaRAMCache

    for label, cache in (("interleaved roles, no state cache", None),
                         ("interleaved roles, LlamaRAMCache", LlamaRAMCache(capacity_bytes=2 << 30))):
        llama.set_cache(cache)
        raw(as_sent(exemplar_prompt(97), ExemplarSet))
        meter.reset()
        started = time.perf_counter()
        for i, (messages, _) in enumerate(prompts[: max(2, items // 2)]):
            meter.add(raw(as_sent(exemplar_prompt(i), ExemplarSet), client._response_format(ExemplarSet)))
            meter.add(raw(as_sent(messages)))
        wall = time.perf_counter() - started
        print(f"  {label}: prefix-cache hit rate {meter.hit_rate:.0%}, {wall:.1f}s")
    llama.set_cache(None)
    ratio = results["personagraph"][0] / results["raw"][0]
    print(f"personagraph_vs_raw {ratio:.2f} prefix_hit_rate {results['personagraph'][1]:.2f} "
          f"(target ratio >= 0.9)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--items", type=int, default=6)
    parser.add_argument("--max-tokens", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=2, help="alternations of raw and personagraph")
    args = parser.parse_args()
    asyncio.run(main(args.model, args.items, args.max_tokens, args.repeats))
