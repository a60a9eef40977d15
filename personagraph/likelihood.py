"""Log-likelihoods of given text under an embedded model, run with torch: the ``evidence`` judge's
likelihood features (``judges/features.py``) read them.

How likely the packaged model finds a reply with the speaker's persona in front of the dialogue, against
without it, says how much the reply draws on the persona — paraphrases included, which shared words miss.
llama-server cannot score a given text: it returns log-probabilities of the tokens it generates, and a
grammar forcing the text picks non-canonical tokens (" mechanical" came out as " "+"me"+"chan"+"ical", one
at −13 nats). So the GGUF is converted once with transformers (``gguf_file=``) into a cache folder
(safetensors in bf16, the tokenizer beside it), and Qwen2's forward pass runs on it in plain torch
(:class:`_Qwen2`): one pass scores every token of a continuation.

The pass runs in bf16 where the CPU multiplies bf16 natively (AVX512-BF16 or AMX), else in fp32
(:func:`precision`): on a 2-core AVX512-BF16 EPYC a 250-token pass of the 1.5B took 2.1 s in bf16 and
6.8 s in fp32; oneDNN's bf16 without those instructions was slower than fp32 (2.7 against 1.6 s for the
0.5B, ``ONEDNN_MAX_CPU_ISA=AVX512_CORE``). The two agree to 0.9996 (Pearson, the 0.5B's features on the
150 USR dev replies; the fitted model's cross-validated ρ moved by 0.001); a run records which it used.

``$PERSONAGRAPH_LIKELIHOOD_MODEL=test`` swaps in :data:`TEST_LM`, a deterministic scorer with no weights
(a word of the continuation that the prefix holds is likelier), as ``test:`` models stand in for LLMs: the
test suite sets it, so tests that judge with the ``evidence`` protocol run no forward pass. A run
records which scorer it read (``provenance.json``: ``likelihood:<name>``).
"""

from __future__ import annotations

import fcntl
import importlib.util
import logging
import os
import re
import shutil
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from personagraph.embeddings import quiet_transformers
from personagraph.errors import PersonagraphError
from personagraph.files import read_json
from personagraph.models.spec import LOCAL_MODELS
from personagraph.models.weights import cache_root, ensure_weights, is_installed

PACKAGED_LM = "qwen2.5-coder-1.5b"
"""The embedded model whose likelihoods the judge's features read (the judge's own: 3 GB in bf16, 6 GB
in fp32). The 0.5B's ranked Overall worse: 0.590 against 0.619 cross-validated, Uses Knowledge alike
(bench/fit_evidence.py)."""
MAX_TOKENS = 1024  # a prefix is cut from its start to keep prefix + continuation within this many tokens

MODEL_ENV = "PERSONAGRAPH_LIKELIHOOD_MODEL"
PRECISION_ENV = "PERSONAGRAPH_LIKELIHOOD_PRECISION"  # bf16 or fp32: to score as a machine of the other kind
PRECISIONS = ("bf16", "fp32")
TEST_LM = "test"
"""The deterministic scorer: −1 nat per continuation word found in the prefix, −6 per other word."""

CACHE_SIZE = 4096  # pairs kept per process: a resumed run or a repeated judge-check scores the same replies
_lock = threading.Lock()  # the loaded models and the cache; one forward pass at a time
_models: dict[str, _Qwen2] = {}
_cache: OrderedDict[tuple[str, str, str], np.ndarray] = OrderedDict()
_scored: set[str] = set()  # the scorers this process read, as name@precision (a background load is none)
_WORD = re.compile(r"\w+")


def scoring_model() -> str:
    """The model the likelihood features read: ``$PERSONAGRAPH_LIKELIHOOD_MODEL``, else :data:`PACKAGED_LM`.

    Raises:
        PersonagraphError: for any other name (the fitted evidence weights read the packaged model's).
    """
    name = os.environ.get(MODEL_ENV) or PACKAGED_LM
    if name not in (PACKAGED_LM, TEST_LM):
        raise PersonagraphError(f"${MODEL_ENV}={name!r}: the evidence judge's weights are fitted on "
                                f"{PACKAGED_LM}'s likelihoods; choose {PACKAGED_LM} or {TEST_LM}")
    return name


def require_installed(name: str | None = None) -> None:
    """Raises when the model's (default: :func:`scoring_model`) weight packages are not installed, saying
    what to do instead, or when ``$PERSONAGRAPH_LIKELIHOOD_PRECISION`` names no precision.

    Raises:
        PersonagraphError: one line naming the model, the extra that installs it and the alternative, or
            the variable and its value.
    """
    _chosen_precision()  # a bad value fails before anything is judged
    name = name or scoring_model()
    if name != TEST_LM and not is_installed(LOCAL_MODELS[name]):
        raise PersonagraphError(
            f"the evidence judge's likelihood features run the embedded {name}, which is not installed: "
            "pip install 'personagraph[local]', or judge with --judge-protocol rationale"
        )


def _chosen_precision() -> str | None:
    chosen = os.environ.get(PRECISION_ENV) or None
    if chosen is not None and chosen not in PRECISIONS:
        raise PersonagraphError(f"${PRECISION_ENV}={chosen!r}: choose {' or '.join(PRECISIONS)}")
    return chosen


def precision() -> str:
    """``$PERSONAGRAPH_LIKELIHOOD_PRECISION`` when set (to score as a machine of the other kind did), else
    ``bf16`` where torch's CPU kernels multiply bf16 natively (AVX512-BF16, AMX), else ``fp32``: emulated
    bf16 is slower than fp32, native bf16 about 3x faster.

    Raises:
        PersonagraphError: when the variable names neither precision.
    """
    chosen = _chosen_precision()
    if chosen is not None:
        return chosen
    import torch

    native = (getattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)()
              or getattr(torch.cpu, "_is_amx_tile_supported", lambda: False)())
    return "bf16" if native else "fp32"


def model_folder(name: str = PACKAGED_LM) -> Path:
    """The converted model's folder, converting the GGUF on first use (1–2 min, once per machine).

    Raises:
        PersonagraphError: when the model is unknown or its weight packages are missing.
    """
    model = LOCAL_MODELS.get(name)
    if model is None:
        raise PersonagraphError(f"no embedded model {name!r} (known: {', '.join(LOCAL_MODELS)})")
    folder = cache_root() / "likelihood" / _converted_name(name)
    if (folder / "config.json").is_file():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f"{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one conversion per machine; the others wait, then find it
        if not (folder / "config.json").is_file():
            _convert(ensure_weights(model), folder)
            remove_stale_conversions()
    return folder


def _converted_name(name: str) -> str:
    return f"{name}-{LOCAL_MODELS[name].sha256[:12]}-bf16"


# A converted folder (or its lock) of any version: <model>-<sha256[:12]>, then -bf16 since the bf16 files.
_CONVERSION = re.compile(r"(?P<model>.+)-[0-9a-f]{12}(?:-bf16)?")


def remove_stale_conversions() -> list[str]:
    """Deletes the converted folders this version never reads, and names them: an earlier version's fp32
    conversions (no ``-bf16`` suffix: 2.5 GB for the 0.5B) and those of GGUFs since replaced (another
    sha). The current conversion of every embedded model stays: ``$PERSONAGRAPH_LIKELIHOOD_MODEL`` may
    name any of them. Run after each conversion and by the install."""
    root = cache_root() / "likelihood"
    current = {_converted_name(name) for name in LOCAL_MODELS}
    removed = []
    for entry in sorted(root.iterdir()) if root.is_dir() else ():
        base = entry.name.removesuffix(".lock")
        match = _CONVERSION.fullmatch(base)
        if match is None or match["model"] not in LOCAL_MODELS or base in current:
            continue  # not a conversion (a half-written one ends in .tmp<pid>), or one still read
        folder = entry.is_dir()
        size = sum(f.stat().st_size for f in entry.rglob("*") if f.is_file()) if folder else 0
        try:
            shutil.rmtree(entry) if folder else entry.unlink()
        except OSError as exc:  # a read-only cache, say: left there, with a warning
            logging.getLogger("personagraph").warning("cannot remove %s (%s)", entry, exc.strerror or exc)
            continue
        if folder:
            logging.getLogger("personagraph").warning(
                "removed %s (%.1f GB): converted by an earlier personagraph, not read by this one", entry,
                size / 1e9)
        removed.append(entry.name)
    return removed


def _convert(gguf: Path, folder: Path) -> None:
    import torch
    from safetensors.torch import save_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    for package in ("gguf", "accelerate"):  # transformers reads GGUF through them
        if importlib.util.find_spec(package) is None:
            raise PersonagraphError(f"converting {gguf.name} for likelihood scoring needs the package "
                                    f"{package}: pip install 'personagraph[local]'")

    quiet_transformers()
    logging.getLogger("personagraph").warning(
        "converting %s for likelihood scoring (once per machine, 1-2 minutes)", gguf.name)
    tmp = folder.with_name(f"{folder.name}.tmp{os.getpid()}")
    try:
        AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name).save_pretrained(tmp)
        lm = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.bfloat16)
        # save_pretrained refuses a model loaded from GGUF (its dequantizer is "not serializable"); its
        # weights are plain bf16 by now, so they are written as they are, with the config minus that.
        # bf16 on disk whatever the CPU: both precisions then compute with the very same weights
        save_model(lm, str(tmp / "model.safetensors"))  # shares the tied embedding and output weights
        config = lm.config
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        config.save_pretrained(tmp)  # config.json last of all: model_folder() takes it as complete
        shutil.rmtree(folder, ignore_errors=True)
        os.replace(tmp, folder)
    except OSError as exc:  # a full disk, a read-only cache: one line, and the next run tries again
        raise PersonagraphError(f"{folder}: cannot write the converted {gguf.name} ({exc.strerror or exc}); "
                                "free space there or set $PERSONAGRAPH_CACHE_DIR") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class _Qwen2:
    """Qwen2's forward pass in plain torch, from the converted folder, in ``dtype`` (``bf16`` or ``fp32``):
    transformers' import and its tokenizer cost ~5 s of CPU on first use (a quick run judges one reply
    with these features), this ~1 s. In fp32, the same log-probabilities as transformers' model
    (tests/test_likelihood.py)."""

    def __init__(self, folder: Path, dtype: str) -> None:
        import torch
        from safetensors.torch import load_file
        from tokenizers import Tokenizer

        config = read_json(folder / "config.json")
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.eos = int(config["eos_token_id"])
        self.dtype = dtype
        wanted = torch.bfloat16 if dtype == "bf16" else torch.float32
        self.w = {key: value.to(wanted) for key, value in load_file(folder / "model.safetensors").items()}
        self.layers = int(config["num_hidden_layers"])
        self.heads, self.kv_heads = int(config["num_attention_heads"]), int(config["num_key_value_heads"])
        self.head_dim = int(config["hidden_size"]) // self.heads
        self.eps = float(config["rms_norm_eps"])
        theta = float((config.get("rope_parameters") or {}).get("rope_theta") or config.get("rope_theta"))
        steps = torch.arange(0, self.head_dim, 2, dtype=torch.float32)
        self.inv_freq = 1.0 / theta ** (steps / self.head_dim)
        self.output = self.w.get("lm_head.weight", self.w["model.embed_tokens.weight"])  # tied or not

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def _norm(self, x: Any, weight: Any) -> Any:
        import torch

        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * weight

    def hidden(self, ids: list[int]) -> Any:
        """The last layer's normalized hidden states of ``ids``, (tokens, hidden)."""
        import torch
        import torch.nn.functional as F

        w, n, d = self.w, len(ids), self.head_dim
        x = w["model.embed_tokens.weight"][torch.tensor(ids)]
        angles = torch.cat([torch.outer(torch.arange(n, dtype=torch.float32), self.inv_freq)] * 2, -1)
        cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)

        def rotate(t: Any) -> Any:
            half = t[..., : d // 2], t[..., d // 2:]
            return t * cos + torch.cat([-half[1], half[0]], -1) * sin

        for i in range(self.layers):
            p = f"model.layers.{i}."
            h = self._norm(x, w[p + "input_layernorm.weight"])
            q = F.linear(h, w[p + "self_attn.q_proj.weight"], w[p + "self_attn.q_proj.bias"])
            k = F.linear(h, w[p + "self_attn.k_proj.weight"], w[p + "self_attn.k_proj.bias"])
            v = F.linear(h, w[p + "self_attn.v_proj.weight"], w[p + "self_attn.v_proj.bias"])
            q, k, v = (t.view(n, -1, d).transpose(0, 1) for t in (q, k, v))
            group = self.heads // self.kv_heads
            k, v = k.repeat_interleave(group, 0), v.repeat_interleave(group, 0)
            attended = F.scaled_dot_product_attention(rotate(q), rotate(k), v, is_causal=True)
            x = x + F.linear(attended.transpose(0, 1).reshape(n, -1), w[p + "self_attn.o_proj.weight"])
            h = self._norm(x, w[p + "post_attention_layernorm.weight"])
            gate = F.silu(F.linear(h, w[p + "mlp.gate_proj.weight"]))
            x = x + F.linear(gate * F.linear(h, w[p + "mlp.up_proj.weight"]), w[p + "mlp.down_proj.weight"])
        return self._norm(x, w["model.norm.weight"])


def _load(name: str) -> _Qwen2:
    if name not in _models:
        _models[name] = _Qwen2(model_folder(name), precision())
    return _models[name]


def load_soon(name: str | None = None) -> None:
    """Loads the model (default: :func:`scoring_model`) on a background thread, so the first scoring call
    finds it ready; a load that fails is left to that call, which loads again and raises."""
    name = name or scoring_model()
    if name != TEST_LM and name not in _models:
        threading.Thread(target=_load_quietly, args=(name,), name="personagraph-likelihood-load",
                         daemon=True).start()


def _load_quietly(name: str) -> None:
    try:
        with _lock:
            _load(name)
    except Exception:  # noqa: BLE001 - reported by the first scoring call, which loads again
        logging.getLogger(__name__).debug("loading %s in the background failed", name, exc_info=True)


def scored_models() -> list[str]:
    """The scorers this process has scored text with, as ``name@precision`` (``test`` alone): a run records
    their weights' hashes, and ``compare`` tells runs scored in different precisions apart."""
    with _lock:
        return sorted(_scored)


def _test_logprobs(prefix: str, continuation: str) -> np.ndarray:
    seen = set(_WORD.findall(prefix.lower()))
    return np.array([-1.0 if w in seen else -6.0 for w in _WORD.findall(continuation.lower())])


# One pass per pair. Where a verdict's time goes (2-core KVM Xeon with AMX, load 0.0-0.3, 2026-12-03,
# torch.profiler; a quick-run verdict's three passes of 158, 129 and 102 tokens): 3.8-4.5 s, 77% of it in
# the MLP matmuls (oneDNN's AMX brgemm, 330-500 GFLOPS at these sizes) and 12% in the output layer (151,936
# words). Packing the three passes into one forward pass of 389 tokens with a block-diagonal causal mask ran
# 3.5-3.9 s against 3.8-4.3 s, and moved the bf16 sums by up to 0.37 nats (other rows in the matmuls round
# differently): not kept, since every fitted weight reads these sums.
def continuation_logprobs(pairs: Sequence[tuple[str, str]], name: str | None = None) -> list[np.ndarray]:
    """Per token of each ``(prefix, continuation)``, the log-probability of the continuation's token after
    the prefix and the tokens before it (natural log), under ``name`` (default: :func:`scoring_model`). An
    empty continuation has none."""
    name = name or scoring_model()
    if name == TEST_LM:
        with _lock:
            _scored.add(name)
        return [_test_logprobs(prefix, continuation) for prefix, continuation in pairs]
    import torch
    import torch.nn.functional as F

    out: list[np.ndarray] = []
    with _lock:
        lm = _load(name)
        _scored.add(f"{name}@{lm.dtype}")
        for prefix, continuation in pairs:
            key = (name, prefix, continuation)
            if key in _cache:
                _cache.move_to_end(key)
                out.append(_cache[key])
                continue
            head, tail = lm.encode(prefix), lm.encode(continuation)[:MAX_TOKENS - 1]
            head = head[max(0, len(head) + len(tail) - MAX_TOKENS):] or [lm.eos]
            if not tail:
                out.append(np.zeros(0))
                continue
            with torch.inference_mode():  # the output layer (151k words) only where a token is scored
                logits = F.linear(lm.hidden(head + tail)[len(head) - 1:-1], lm.output).float()
            chosen = torch.log_softmax(logits, -1).gather(1, torch.tensor(tail)[:, None])[:, 0]
            _cache[key] = chosen.numpy().astype(np.float64)
            _cache[key].setflags(write=False)  # shared by every caller that asks again
            while len(_cache) > CACHE_SIZE:
                _cache.popitem(last=False)
            out.append(_cache[key])
    return out
