"""The embedded 1.5B's speed on each CPU variant of the installed llama-server that this machine can run.

ggml loads the best CPU variant the machine supports; the build keeps only the variants that differ in
speed (scripts/build_llama_server.sh). This bench checks that choice on the machine at hand: for every
variant library in the install, a copy of the install with that variant alone (ggml then loads it, or
none when the CPU lacks its instructions), a prompt read and tokens generated, three runs each, the
server's own timings. Point ``--server`` at another build (a folder with ``llama-server``) to compare
variants this install leaves out.

    .venv/bin/python bench/cpu_variants.py [--server FOLDER] [--runs 3]

Lines: ``variant <name> prompt_tok_s <runs> decode_tok_s <runs>`` with the machine and load.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._harness import load_average, machine  # noqa: E402
from personagraph.models.engine import Engine, EngineFailed, server_path  # noqa: E402
from personagraph.models.openai_http import close_sessions, post_json  # noqa: E402
from personagraph.models.spec import LOCAL_MODELS  # noqa: E402
from personagraph.prompts import load_prompt  # noqa: E402

MODEL = "qwen2.5-coder-1.5b"
TOKENS = 32


def _prompt() -> str:
    """A prompt like the eval's: the question writer's instructions (``prompts/generate_questions.yaml``)."""
    prompt = load_prompt("generate_questions")
    return f"{prompt.system}\n{prompt.user}"


async def _timings(engine: Engine, runs: int) -> list[tuple[float, float]]:
    """(prompt tok/s, decode tok/s) of ``runs`` calls, the prompt read afresh each time."""
    root = (await engine.base_url()).removesuffix("/v1")
    out = []
    for run in range(runs):
        body = {"prompt": f"{run}. {_prompt()}", "n_predict": TOKENS, "temperature": 0.0,
                "cache_prompt": False, "ignore_eos": True}
        timings = (await post_json(root + "/completion", body, timeout_s=600))["timings"]
        out.append((float(timings["prompt_per_second"]), float(timings["predicted_per_second"])))
    return out


def measure(folder: Path, variant: str, runs: int) -> list[tuple[float, float]] | None:
    """The timings on ``variant`` alone, None when this CPU cannot load it."""
    with tempfile.TemporaryDirectory(prefix=f"pg-variant-{variant}-") as tmp:
        for path in folder.iterdir():
            if not path.name.startswith("libggml-cpu-") or path.name == f"libggml-cpu-{variant}.so":
                shutil.copy2(path, Path(tmp) / path.name, follow_symlinks=False)
        os.environ["PERSONAGRAPH_LLAMA_SERVER"] = str(Path(tmp) / "llama-server")
        engine = Engine(LOCAL_MODELS[MODEL], slots=1)

        async def timed() -> list[tuple[float, float]]:
            try:
                return await _timings(engine, runs)
            finally:
                await close_sessions()

        try:
            return asyncio.run(timed())
        except EngineFailed:
            return None
        finally:
            engine.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", type=Path, default=server_path().parent,
                        help="a llama-server install folder (default: this venv's)")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    variants = sorted(p.name.removeprefix("libggml-cpu-").removesuffix(".so")
                      for p in args.server.glob("libggml-cpu-*.so"))
    print(machine(), f"· {MODEL}, 1 slot, {TOKENS} tokens generated, {args.server}", flush=True)
    for variant in variants:
        timings = measure(args.server, variant, args.runs)
        if timings is None:
            print(f"variant {variant} not loadable on this CPU", flush=True)
            continue
        prompt = " ".join(f"{p:.1f}" for p, _ in timings)
        decode = " ".join(f"{d:.1f}" for _, d in timings)
        print(f"variant {variant} prompt_tok_s {prompt} decode_tok_s {decode} (load {load_average()})",
              flush=True)


if __name__ == "__main__":
    main()
