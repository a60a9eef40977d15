"""Speculative decoding for the embedded judge: the 1.5B's calls of a finished run, replayed against
llama-server with and without the packaged 0.5B as its draft model.

Why: the quick run's 1.5B calls are decode-bound on 2 cores (~490 generated tokens at 4–10 tok/s against
~5,100 prompt tokens at 40–130 tok/s), and the two Qwen2.5-Coder models share a tokenizer, the textbook
draft pair. The calls are read from the run's store (``calls.request``: messages and sampling parameters,
JSON schema and logprobs included) and sent one at a time to the engine's own server at one slot, so
both see the same requests; the variants alternate (ABBA…) to spread the host's drift over both.

    .venv/bin/personagraph eval --persona "A 70-year-old retired cowboy from Texas" --quick --run-dir D
    .venv/bin/python bench/speculative.py D [--repeats 2] [--draft-max 3]

One line per variant and repeat (seconds, generated tokens, drafted and accepted tokens), then
``plain_s <s> draft_s <s> draft_acceptance <share>`` (sums over the repeats).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._harness import fresh_server, machine, stored_bodies  # noqa: E402
from personagraph.models.spec import LOCAL_MODELS  # noqa: E402
from personagraph.models.weights import ensure_weights  # noqa: E402

TARGET, DRAFT = "qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b"


async def serve(extra: tuple[str, ...], bodies: list[dict[str, Any]]) -> tuple[float, int, int, int]:
    """Starts the 1.5B's engine at one slot with ``extra`` server arguments, sends ``bodies`` one at a time,
    stops it. Returns seconds, generated, drafted and accepted tokens."""
    seconds, generated, drafted, accepted = 0.0, 0, 0, 0
    async with fresh_server(TARGET, slots=1, extra_args=extra) as send:
        for body in bodies:
            started = time.monotonic()
            timings = (await send(body))["timings"]
            seconds += time.monotonic() - started
            generated += timings["predicted_n"]
            drafted += timings.get("draft_n", 0)
            accepted += timings.get("draft_n_accepted", 0)
    return seconds, generated, drafted, accepted


def main(run_dir: Path, repeats: int, draft_max: int) -> None:
    print(machine(), flush=True)
    bodies = [body for _, body in stored_bodies(run_dir, f"local:{TARGET}")]
    draft = ("--spec-type", "draft-simple", "--model-draft", str(ensure_weights(LOCAL_MODELS[DRAFT])),
             "--spec-draft-n-max", str(draft_max))
    totals = {"plain": [0.0, 0, 0], "draft": [0.0, 0, 0]}
    variants: list[tuple[str, tuple[str, ...]]] = [("plain", ()), ("draft", draft)]
    for repeat in range(repeats):
        for name, extra in variants if repeat % 2 == 0 else variants[::-1]:
            seconds, generated, drafted, accepted = asyncio.run(serve(extra, bodies))
            print(f"repeat {repeat} {name}: {seconds:.1f} s, {len(bodies)} calls, {generated} tokens "
                  f"generated, {accepted} of {drafted} drafted accepted", flush=True)
            totals[name][0] += seconds
            totals[name][1] += drafted
            totals[name][2] += accepted
    drafted, accepted = totals["draft"][1], totals["draft"][2]
    print(f"plain_s {totals['plain'][0]:.1f} draft_s {totals['draft'][0]:.1f} "
          f"draft_acceptance {accepted / drafted if drafted else 0:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path, help="a finished quick run's directory (its run.sqlite)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--draft-max", type=int, default=3,
                        help="tokens drafted per step (llama.cpp's default)")
    args = parser.parse_args()
    main(args.run_dir, args.repeats, args.draft_max)
