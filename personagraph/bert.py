"""A mean-pooled BERT sentence encoder (all-MiniLM-L6-v2's architecture) run in numpy.

Why not sentence-transformers for it: importing sentence-transformers, the transformers model loader and
torch costs ~4 s of CPU per process (2-core KVM Xeon, AVX-512 + AMX, load 0.4: torch 1.9 s, transformers
1.0 s, sentence-transformers 3.0 s, loading 0.3 s) and ~180 MB of memory for torch alone, before the quick
run's first LLM call can be sent (the shortlist embeds the persona first), beside the embedded models'
engines. This forward pass needs numpy, scipy's ``erf``, ``safetensors`` and ``tokenizers`` only and gives
the same vectors: the same weights, tokenizer, truncation and arithmetic in float32
(``tests/test_bert.py`` checks it against sentence-transformers itself, to 1e-5).

It reads a sentence-transformers folder whose modules are exactly Transformer (a ``bert`` model with
absolute positions and GELU) → mean Pooling → Normalize; :func:`supports` says whether a folder is one.
Any other folder is loaded by sentence-transformers (``embeddings.load_encoder``).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from personagraph.errors import PersonagraphError
from personagraph.files import read_json

_MODULES = ["sentence_transformers.models.Transformer", "sentence_transformers.models.Pooling",
            "sentence_transformers.models.Normalize"]


def supports(folder: str | Path) -> bool:
    """Whether ``folder`` is a sentence-transformers BERT folder this encoder reproduces exactly."""
    root = Path(folder)
    try:
        modules = read_json(root / "modules.json")
        config = read_json(root / "config.json")
        pooling = read_json(root / modules[1]["path"] / "config.json") if len(modules) == 3 else {}
    except (PersonagraphError, KeyError, TypeError, IndexError):  # not a folder it can read: not its kind
        return False
    modes = {key for key, value in pooling.items() if key.startswith("pooling_mode_") and value}
    mean_only = modes == {"pooling_mode_mean_tokens"}
    return (
        [m.get("type") for m in modules] == _MODULES
        and modules[0].get("path") == ""
        and mean_only
        and config.get("model_type") == "bert"
        and config.get("hidden_act") == "gelu"
        and config.get("position_embedding_type", "absolute") == "absolute"
        and (root / "model.safetensors").is_file()
        and (root / "tokenizer.json").is_file()
    )


class BertEncoder:
    """Encodes texts into unit vectors: BERT, the mean of the token states under the mask, L2 norm."""

    def __init__(self, folder: str | Path) -> None:
        from safetensors.numpy import load_file  # only when a text is encoded
        from tokenizers import Tokenizer

        root = Path(folder)
        config = read_json(root / "config.json")
        settings_file = root / "sentence_bert_config.json"
        settings = read_json(settings_file) if settings_file.is_file() else {}
        self._heads = int(config["num_attention_heads"])
        self._eps = float(config["layer_norm_eps"])
        self.dimension = int(config["hidden_size"])
        # sentence-transformers truncates at max_seq_length (the tokenizer file's own setting is ignored)
        max_length = min(int(settings.get("max_seq_length") or 512), int(config["max_position_embeddings"]))
        self._tokenizer = Tokenizer.from_file(str(root / "tokenizer.json"))
        self._tokenizer.enable_truncation(max_length)
        self._tokenizer.no_padding()
        self._lower = bool(settings.get("do_lower_case"))
        weights = load_file(str(root / "model.safetensors"))
        prefix = "bert." if "bert.embeddings.word_embeddings.weight" in weights else ""
        self._w: dict[str, np.ndarray] = {}
        for name, tensor in weights.items():
            if name.startswith(prefix):
                value = tensor.astype(np.float32)
                if value.ndim == 2 and "embeddings" not in name:  # a dense layer's (out, in) matrix,
                    value = np.ascontiguousarray(value.T)  # kept as (in, out): ``x @ w`` is the layer
                self._w[name.removeprefix(prefix)] = value
        self._layers = int(config["num_hidden_layers"])

    def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        """``(n, dimension)`` float32 unit vectors, in the order of ``texts`` (batched by length, as
        sentence-transformers batches, so a batch pads little)."""
        encoded = self._tokenizer.encode_batch([t.lower() if self._lower else t for t in texts])
        order = sorted(range(len(texts)), key=lambda i: -len(encoded[i].ids))
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for start in range(0, len(order), batch_size):
            rows = order[start:start + batch_size]
            width = max(len(encoded[i].ids) for i in rows)
            ids = np.zeros((len(rows), width), dtype=np.int64)
            types = np.zeros_like(ids)
            mask = np.zeros((len(rows), width), dtype=bool)
            for r, i in enumerate(rows):
                n = len(encoded[i].ids)
                ids[r, :n] = encoded[i].ids
                types[r, :n] = encoded[i].type_ids
                mask[r, :n] = True
            out[rows] = self._forward(ids, types, mask)
        return out

    def _forward(self, ids: np.ndarray, types: np.ndarray, mask: np.ndarray) -> np.ndarray:
        from scipy.special import erf

        w = self._w
        batch, width = ids.shape
        head = self.dimension // self._heads

        def linear(name: str, value: np.ndarray) -> np.ndarray:  # one (tokens, in) @ (in, out) product
            weight = w[name + ".weight"]
            return (value.reshape(-1, weight.shape[0]) @ weight + w[name + ".bias"]).reshape(batch, width, -1)

        def norm(name: str, value: np.ndarray) -> np.ndarray:
            centred = value - value.mean(-1, keepdims=True)
            scale = 1 / np.sqrt((centred * centred).mean(-1, keepdims=True) + np.float32(self._eps))
            return centred * scale * w[name + ".weight"] + w[name + ".bias"]

        def heads(value: np.ndarray) -> np.ndarray:  # (batch, width, dimension) -> (batch, heads, width, .)
            return value.reshape(batch, width, self._heads, head).transpose(0, 2, 1, 3)

        x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:width]
             + w["embeddings.token_type_embeddings.weight"][types])
        x = norm("embeddings.LayerNorm", x)
        padding = np.where(mask, np.float32(0), np.float32(-np.inf))[:, None, None, :]  # never attended to
        scale = np.float32(1 / math.sqrt(head))
        for i in range(self._layers):
            layer = f"encoder.layer.{i}."
            q, k, v = (heads(linear(f"{layer}attention.self.{n}", x)) for n in ("query", "key", "value"))
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale + padding
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            context = (scores / scores.sum(-1, keepdims=True)) @ v
            context = context.transpose(0, 2, 1, 3).reshape(batch, width, self.dimension)
            attended = linear(f"{layer}attention.output.dense", context) + x
            x = norm(f"{layer}attention.output.LayerNorm", attended)
            hidden = linear(f"{layer}intermediate.dense", x)
            hidden = np.float32(0.5) * hidden * (1 + erf(hidden / np.float32(math.sqrt(2))))  # exact GELU
            x = norm(f"{layer}output.LayerNorm", linear(f"{layer}output.dense", hidden) + x)
        weights = mask[..., None].astype(np.float32)
        pooled = (x * weights).sum(1) / np.maximum(weights.sum(1), np.float32(1e-9))
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), np.float32(1e-12))
