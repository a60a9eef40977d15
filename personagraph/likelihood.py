"""Log-likelihoods of given text under an embedded model, read from the llama.cpp engine that serves it.

How likely the packaged model finds a reply with the speaker's persona in front of the dialogue, against
without it, says how much the reply draws on the persona (``judges/features.py``: the likelihood
features). The server tokenizes prefix and text apart (``/tokenize``), so the text is always the same
tokens whatever precedes it, and ``/completion`` reads the prefix's and the text's tokens as one prompt with
``n_prompt_logprobs`` set to the text's length: the server returns, in ``prompt_logprobs``, the
log-softmax of the model's raw logits for each of the text's tokens at its position, as a forward pass
gives it. That request field is added to llama-server by ``scripts/llama-patches/prompt-logprobs.patch``
(the stock server returns log-probabilities of generated tokens only); the text is read in the prompt's
one pass instead of one decode step per token.

The engine is the one that already serves the model to the judges (``models/engine.py``): no second
copy of the weights, and the server's prompt cache shares the prefix of a verdict's calls.

``$PERSONAGRAPH_LIKELIHOOD_MODEL=test`` swaps in :data:`TEST_LM`, a deterministic scorer with no weights
(a word of the continuation that the prefix holds is likelier), as ``test:`` models stand in for LLMs: the
test suite sets it. A run records which scorer it read (``provenance.json``: ``likelihood:<name>``).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

from personagraph.errors import PersonagraphError
from personagraph.models.spec import LOCAL_MODELS
from personagraph.models.weights import is_installed

PACKAGED_LM = "qwen2.5-coder-1.5b"
"""The embedded model whose likelihoods the judge's features read: the judge's own."""
MAX_TOKENS = 2048
"""A prefix is cut from its start to keep prefix + continuation within this many tokens, or within one slot
of the engine when ``$PERSONAGRAPH_N_CTX`` makes a slot smaller (:func:`scored_limit`)."""
MAX_CONTINUATION = 32
"""Tokens of a continuation scored (the most the engine's ``n_prompt_logprobs`` takes): a longer reply is
scored on its start. The fitted model that reads these scores (``judges/evidence.yaml``) was fitted on USR
PersonaChat replies of at most 23 tokens; an eval's answers run to 40–100, and an answer shows its persona,
or contradicts it, from its first sentences (the effect on every dev file:
docs/benchmarks.md#fitting-the-evidence-model)."""

MODEL_ENV = "PERSONAGRAPH_LIKELIHOOD_MODEL"
TEST_LM = "test"
"""The deterministic scorer: −1 nat per continuation word found in the prefix, −6 per other word."""
TIMEOUT_S = 600.0  # one scoring call: a long prefix on a busy 2-core machine takes tens of seconds

CACHE_SIZE = 4096  # readings kept per process: a resumed run or a repeated judge-check reads the same replies
_lock = threading.Lock()  # the record of scorers read
_scored: set[str] = set()


class _Recent:
    """The last :data:`CACHE_SIZE` readings of the engine, by key, the least recently read dropped first
    (thread-safe)."""

    def __init__(self) -> None:
        self._values: OrderedDict[tuple[str, ...], Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, ...]) -> Any | None:
        with self._lock:
            if key not in self._values:
                return None
            self._values.move_to_end(key)
            return self._values[key]

    def put(self, key: tuple[str, ...], value: Any) -> None:
        with self._lock:
            self._values[key] = value
            self._values.move_to_end(key)
            while len(self._values) > CACHE_SIZE:
                self._values.popitem(last=False)


_logprobs = _Recent()  # continuation_logprobs, by model, prefix and continuation
_answers = _Recent()  # yes_probability, by model and messages
_WORD = re.compile(r"\w+")


class LikelihoodError(PersonagraphError):
    """The engine could not score a text (it failed, or answered with something that is not a score)."""


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
    """Raises when the model (default: :func:`scoring_model`) is not installed, saying what to do instead.

    Raises:
        PersonagraphError: one line naming the model, the extra that installs it and the alternative.
    """
    name = name or scoring_model()
    if name != TEST_LM and not is_installed(LOCAL_MODELS[name]):
        raise PersonagraphError(
            f"the evidence judge's likelihood features read the embedded {name}, which is not installed: "
            "pip install 'personagraph[local]', or judge with --judge-protocol rationale"
        )


def load_soon(name: str | None = None) -> None:
    """Starts the engine of the model (default: :func:`scoring_model`) in the background, so the first
    scoring call finds it loaded; a start that fails is reported by that call."""
    name = name or scoring_model()
    if name != TEST_LM:
        from personagraph.models.engine import engine_for

        engine_for(name).start_soon()


def scored_models() -> list[str]:
    """The scorers this process has scored text with: a run records their weights' hashes."""
    with _lock:
        return sorted(_scored)


def _test_logprobs(prefix: str, continuation: str) -> np.ndarray:
    seen = set(_WORD.findall(prefix.lower()))
    return np.array([-1.0 if w in seen else -6.0 for w in _WORD.findall(continuation.lower())])


async def continuation_logprobs(pairs: Sequence[tuple[str, str]],
                                name: str | None = None) -> list[np.ndarray]:
    """Per token of each ``(prefix, continuation)``, the log-probability of the continuation's token after
    the prefix and the tokens before it (natural log), under ``name`` (default: :func:`scoring_model`),
    the pairs scored concurrently (the engine batches them). An empty continuation has none.

    Raises:
        LikelihoodError: the engine failed (after the retries of a transient fault) or its answer is not a
            score (one line).
        EngineFailed: the engine cannot start.
    """
    name = name or scoring_model()
    with _lock:
        _scored.add(name)
    if name == TEST_LM:
        return [_test_logprobs(prefix, continuation) for prefix, continuation in pairs]
    found: dict[tuple[str, str], np.ndarray] = {}
    for pair in pairs:
        if (known := _logprobs.get((name, *pair))) is not None:
            found[pair] = known
    todo = [pair for pair in dict.fromkeys(pairs) if pair not in found]
    if todo:  # each text tokenized once: a reply is scored after several prefixes
        texts = list(dict.fromkeys(text for pair in todo for text in pair if text))
        ids = dict(zip(texts, await asyncio.gather(*(_tokenize(name, t) for t in texts)), strict=True))
        scored = await asyncio.gather(*(_scores_after(name, ids.get(prefix, []), ids.get(reply, []))
                                        for prefix, reply in todo))
        for pair, values in zip(todo, scored, strict=True):
            _logprobs.put((name, *pair), values)
        found.update(zip(todo, scored, strict=True))
    return [found[pair] for pair in pairs]


def scored_limit() -> int:
    """The most tokens a scored prompt holds: :data:`MAX_TOKENS`, and one fewer than a slot of the engine
    (which predicts one token after the prompt), so a long prefix is cut rather than refused."""
    from personagraph.models.engine import CTX_PER_SLOT

    return min(MAX_TOKENS, CTX_PER_SLOT - 1)


async def _scores_after(name: str, head: list[int], tail: list[int]) -> np.ndarray:
    """The log-probabilities of ``tail``'s tokens (its first :data:`MAX_CONTINUATION`) after ``head``."""
    tail = tail[:MAX_CONTINUATION]
    if not tail:
        return np.zeros(0)
    head = head[max(0, len(head) + len(tail) - scored_limit()):]
    if not head:  # the first token of a prompt has no log-probability
        raise LikelihoodError("a text is scored after a prefix, and this prefix holds no tokens")
    body = {"prompt": head + tail, "n_prompt_logprobs": len(tail), "n_predict": 1, "temperature": 0.0,
            "cache_prompt": True}
    values = _prompt_logprobs(await _post(name, "/completion", body), len(head) + len(tail), len(tail))
    values.setflags(write=False)  # shared by every caller that asks again
    return values


YES_NO_ALTERNATIVES = 10  # first-token alternatives read for Yes and No


async def yes_probability(messages: list[dict[str, str]], name: str | None = None) -> float:
    """P(Yes) / (P(Yes) + P(No)) of the first token the model (default: :func:`scoring_model`) answers
    ``messages`` with (chat template, greedy), read from its ``YES_NO_ALTERNATIVES`` most likely tokens;
    0.5 when neither is among them; asked once per process (a retried verdict reads the answer again). The
    test scorer answers 0.5.

    Raises:
        LikelihoodError: as :func:`continuation_logprobs`.
        EngineFailed: the engine cannot start.
    """
    name = name or scoring_model()
    with _lock:
        _scored.add(name)
    if name == TEST_LM:
        return 0.5
    key = (name, json.dumps(messages, sort_keys=True))
    if (known := _answers.get(key)) is not None:
        return float(known)
    body = {"messages": messages, "max_tokens": 1, "temperature": 0.0, "logprobs": True,
            "top_logprobs": YES_NO_ALTERNATIVES, "cache_prompt": True}
    share = _yes_share(await _post(name, "/v1/chat/completions", body))
    _answers.put(key, share)
    return share


def _yes_share(reply: Any) -> float:
    """P(Yes) against P(No) among the first token's alternatives in an engine's chat reply, read as the
    model layer reads any reply's log-probabilities (``openai_http.parse_logprobs``: untrusted, every value
    checked)."""
    from personagraph.models.openai_http import parse_logprobs

    try:
        tokens = parse_logprobs(reply["choices"][0]["logprobs"])
    except (KeyError, IndexError, TypeError):
        tokens = None
    if not tokens:
        raise LikelihoodError("the engine's reply holds no first-token log-probabilities")
    alternatives = [(token.strip().lower(), np.exp(lp)) for token, lp in tokens[0].top]
    yes = sum(p for token, p in alternatives if token == "yes")
    no = sum(p for token, p in alternatives if token == "no")
    return float(yes / (yes + no)) if yes + no > 0 else 0.5


def _prompt_logprobs(reply: Any, n_prompt: int, n_scored: int) -> np.ndarray:
    """The log-probabilities of the last ``n_scored`` of ``n_prompt`` prompt tokens, read from the engine's
    reply (untrusted: it must have read the whole prompt and scored as many tokens as asked, and every value
    must be a log-probability as the model layer checks one, ``openai_http.log_probability``)."""
    from personagraph.models.openai_http import log_probability

    try:
        raw = list(reply["prompt_logprobs"])
        evaluated = int(reply["tokens_evaluated"])
    except (KeyError, TypeError, ValueError) as exc:
        raise LikelihoodError(f"the engine's reply holds no prompt log-probabilities ({exc!r:.60}): is its "
                              "llama-server built with scripts/llama-patches? (scripts/install.sh)") from None
    if evaluated != n_prompt or len(raw) != n_scored:
        raise LikelihoodError(f"the engine scored {len(raw)} of a {evaluated}-token prompt, not the last "
                              f"{n_scored} of {n_prompt} tokens asked")
    try:
        return np.array([log_probability(value) for value in raw], dtype=np.float64)
    except ValueError:
        raise LikelihoodError("the engine's log-probabilities are not finite numbers ≤ 0") from None


async def _tokenize(name: str, text: str) -> list[int]:
    reply = await _post(name, "/tokenize", {"content": text, "add_special": False}, slot=False)
    try:
        return [int(t) for t in reply["tokens"]]
    except (KeyError, TypeError, ValueError):
        raise LikelihoodError("the engine's /tokenize reply holds no token ids") from None


async def _post(name: str, path: str, body: dict[str, Any], *, slot: bool = True) -> Any:
    """``body`` posted to ``path`` of the model's engine, to the slot its ``Engine.pinned`` picks for it
    unless ``slot`` is False (a request no slot serves), a transient fault (a dropped connection, an engine
    restarted on another port) retried as the model layer retries calls (:class:`RetryPolicy`)."""
    from personagraph.models.engine import engine_for, explain_refusal
    from personagraph.models.openai_http import PermanentModelError, post_json
    from personagraph.models.retry import RetryPolicy, TransientModelError

    policy = RetryPolicy()
    for attempt in range(policy.attempts):
        try:
            if not slot:
                root = (await engine_for(name).base_url()).removesuffix("/v1")  # restarted: its new port
                return await post_json(root + path, body, timeout_s=TIMEOUT_S)
            async with engine_for(name).pinned(body.get("messages"), body.get("prompt")) as (url, slot):
                return await post_json(url.removesuffix("/v1") + path, {**body, **slot}, timeout_s=TIMEOUT_S)
        except PermanentModelError as exc:
            reason = explain_refusal(str(exc))
            raise LikelihoodError(f"scoring a text on the engine failed: {reason}") from None
        except TransientModelError as exc:
            if attempt + 1 == policy.attempts:
                message = f"scoring a text on the engine failed {policy.attempts} times: {exc}"
                raise LikelihoodError(message) from None
            await asyncio.sleep(policy.delay(attempt, exc.retry_after))
    raise AssertionError("unreachable")  # pragma: no cover
