"""The ``behavior-alignment`` run: a labeller (LLM or classifier) on the human recommender utterances
(Cohen's κ against the human labels), then on the system's responses (behavior alignment with the human
turns). ``metrics/behavior.py`` loads INSPIRED dialogues and holds the labellers and statistics.

Items: every LLM label (``behavior.label``: stage ``labels`` for a human utterance, ``system labels`` for
a system response) and every generated response (``behavior.response``) is a record ``{id, status,
error, …}`` as it finishes; a failed one (a failed call, no valid label, an empty response) is a failed
item, done again on resume unless ``retry_failed`` is off.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import Field

from personagraph.errors import PersonagraphError
from personagraph.metrics.behavior import (
    KIND,
    STRATEGIES_FILE,
    BehaviorConfig,
    Dialogue,
    Estimate,
    LLMLabeller,
    StrategyClassifier,
    Turn,
    ba,
    behavior_alignment,
    cohen_kappa,
    load_inspired,
    load_responses,
)
from personagraph.models import ModelClient, ModelSettings, parse_spec
from personagraph.prompts import load_prompt
from personagraph.records import BehaviorLabel, BehaviorResponse, BehaviorSystemTurn, register_record_type
from personagraph.resources import data_hash
from personagraph.runs.base import (
    FailedItem,
    ProgressHandler,
    Run,
    Summary,
    failed_records,
    record_failures,
    synchronous,
)

SUMMARY_FILE = "behavior_summary.json"
LABEL = f"{KIND}.label"
RESPONSE = f"{KIND}.response"
SYSTEM = f"{KIND}.system"  # a labelled system response beside the turn's human labels
register_record_type(LABEL, BehaviorLabel)
register_record_type(RESPONSE, BehaviorResponse)
register_record_type(SYSTEM, BehaviorSystemTurn)
LABELS, SYSTEM_LABELS, RESPONSES = "labels", "system labels", "responses"  # the stages of the items


class BehaviorSummary(Summary):
    """What a behavior-alignment run measured.

    Attributes:
        labeller: which labeller labelled (``llm:<spec>`` or ``classifier:<embeddings>``).
        dialogues: dialogues read.
        kappa: Cohen's κ (bootstrap CI) between the labeller and the human labels of the human recommender
            utterances.
        labelled_utterances: human utterances with a human label (κ's sample).
        labeller_failures: utterances the labeller gave no valid label (left out of κ).
        system: where the system responses came from (None: only the labeller was evaluated).
        ba: the system's behavior alignment (first recommender turn of each dialogue excluded).
        responses: system responses evaluated. failed_responses: empty responses or failed calls (left out
            of BA, reported here). unlabelled_turns: human turns without a label (left out of BA).
            system_labeller_failures: system responses the labeller gave no valid label (left out of BA).
        label_counts: strategy counts of the human labels, the labeller on human utterances, and the system.
    """

    labeller: str
    dialogues: int
    kappa: Estimate
    labelled_utterances: int
    labeller_failures: int
    system: str | None = None
    ba: Estimate | None = None
    responses: int = 0
    failed_responses: int = 0
    unlabelled_turns: int = 0
    system_labeller_failures: int = 0
    label_counts: dict[str, dict[str, int]] = Field(default_factory=dict)


def _counts(labels: Sequence[str | None]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for label in labels:
        if label is not None:
            counts[label] = counts.get(label, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


async def run(
    config: BehaviorConfig,
    run_dir: str | Path,
    *,
    settings: ModelSettings | None = None,
    on_progress: ProgressHandler | None = None,
) -> BehaviorSummary:
    """Labels the human and system responses and measures κ and behavior alignment.

    Args:
        config: the run.
        run_dir: the run directory (LLM calls are cached there, so a rerun resumes).
        settings: model endpoint settings for LLM labeller/system specs.
        on_progress: receives a :class:`~personagraph.runs.base.ProgressEvent` per finished item (stages
            ``labels``, ``responses``, ``system labels``).

    Raises:
        PersonagraphError: bad data or labels, neither or both labellers, a classifier file that is not one.
    """
    if (config.labeller is None) == (config.classifier is None):
        raise PersonagraphError("give exactly one of --labeller SPEC or --classifier PATH")
    if config.fit_classifier and config.classifier is None:
        raise PersonagraphError("--fit-classifier needs --classifier PATH to save the fitted classifier to")
    if config.responses and config.system:
        raise PersonagraphError("give at most one of --responses FILE or --system SPEC")
    for spec in (config.labeller, config.system):
        if spec:
            parse_spec(spec)
    dialogues = load_inspired(config.dialogues, system_speaker=config.system_speaker, limit=config.limit)
    responses = load_responses(config.responses, dialogues) if config.responses else None

    classifier: StrategyClassifier | None = None
    if config.fit_classifier:
        train = load_inspired(config.fit_classifier, system_speaker=config.system_speaker)
        pairs = [
            (text, labels[0])
            for d in train
            for t in d.turns
            if t.is_system
            for text, labels in zip(t.texts, t.labels, strict=True)
            if labels
        ]
        classifier = await asyncio.to_thread(
            StrategyClassifier.fit,
            [p[0] for p in pairs],
            [p[1] for p in pairs],
            embedding_model=config.embedding_model,
            seed=config.seed,
        )
        classifier.save(config.classifier)  # type: ignore[arg-type]
    elif config.classifier:
        classifier = StrategyClassifier.load(config.classifier)

    with Run(KIND, run_dir, config, summary_file=SUMMARY_FILE, retry_failed=config.retry_failed,
             on_progress=on_progress) as the_run:
        the_run.record(strategies=data_hash(STRATEGIES_FILE))
        store, meter = the_run.store, the_run.meter
        llm = None
        if config.labeller:
            llm = LLMLabeller(
                ModelClient.create(
                    config.labeller,
                    "strategy_labeller",
                    store=store,
                    meter=meter,
                    settings=settings,
                    temperature=0.0,
                    max_tokens=64,
                )
            )
        labeller_name = llm.name if llm else classifier.name  # type: ignore[union-attr]
        failures: list[FailedItem] = []

        async def item_record(
            stage: str, kind: str, item: str, model: str, work: Callable[[], Awaitable[dict[str, Any]]]
        ) -> dict[str, Any]:
            """The record of one item: the stored one, or a new one from ``await work()`` (a failed one again
            when retrying); its failure, if any, goes to ``failures``."""
            record = store.get(kind, f"{stage}|{item}")
            pending = the_run.pending(record_failures(stage, record, model))
            if pending:
                record = {"id": item, **await work()}
                store.put(kind, f"{stage}|{item}", record, unit=stage)
            failures.extend(failed_records(stage, [record], model))
            the_run.advance(stage, reused=not pending)
            return record

        async def label_all(stage: str, requests: list[tuple[str, str, str]]) -> list[str | None]:
            """Labels of ``(item id, context, text)`` requests."""
            the_run.expect(stage, len(requests))
            if classifier is not None:
                labels = list(await asyncio.to_thread(classifier.predict, [text for _, _, text in requests]))
                the_run.advance(stage, len(labels))
                return labels
            assert llm is not None and config.labeller is not None

            async def one(item: str, context: str, text: str) -> str | None:
                async def work() -> dict[str, Any]:
                    label, error = await llm.attempt(context, text)
                    return {"label": label, "status": "ok" if label else "failed", "error": error}

                return (await item_record(stage, LABEL, item, config.labeller, work))["label"]

            return list(await asyncio.gather(*(one(*request) for request in requests)))

        # 1. the labeller on the human recommender utterances, against the human labels → κ
        human_requests, human_labels = [], []
        for dialogue in dialogues:
            for turn in dialogue.turns:
                if not turn.is_system:
                    continue
                for i, (text, labels) in enumerate(zip(turn.texts, turn.labels, strict=True)):
                    if labels:
                        item = f"{dialogue.id}|{turn.index}|{i}"
                        human_requests.append((item, dialogue.context(turn.index), text))
                        human_labels.append(labels[0])
        predicted = await label_all(LABELS, human_requests)
        paired = [(p, h) for p, h in zip(predicted, human_labels, strict=True) if p is not None]
        kappa = cohen_kappa(
            [p for p, _ in paired], [h for _, h in paired], n_resamples=config.n_resamples, seed=config.seed
        )
        summary = BehaviorSummary(
            labeller=labeller_name,
            dialogues=len(dialogues),
            kappa=kappa,
            labelled_utterances=len(human_labels),
            labeller_failures=len(human_labels) - len(paired),
            label_counts={"human": _counts(human_labels), "labeller": _counts(predicted)},
        )

        # 2. the system's responses (given or generated), labelled, against the human turns → BA
        targets = [(d, t) for d in dialogues for t in d.turns if t.is_system and t.system_index >= 2]
        if responses is not None or config.system:
            texts: dict[tuple[str, int], str | None]
            if responses is not None:
                texts = {t.key: responses[t.key] for _, t in targets if t.key in responses}
                summary.system = f"responses: {config.responses}"
            else:
                client = ModelClient.create(
                    config.system,
                    "crs",
                    store=store,
                    meter=meter,  # type: ignore[arg-type]
                    settings=settings,
                    max_tokens=config.max_tokens,
                )

                async def respond(d: Dialogue, t: Turn) -> str | None:
                    async def work() -> dict[str, Any]:
                        result = await client.complete(
                            load_prompt("strategy_crs").messages(context=d.context(t.index))
                        )
                        text = result.text.strip() if result.ok else ""
                        status = "ok" if text else "empty" if result.ok else "failed"
                        error = None if text else result.error or "empty reply"
                        return {"text": text or None, "status": status, "error": error}

                    item = f"{t.dialog_id}|{t.system_index}"
                    return (await item_record(RESPONSES, RESPONSE, item, client.name, work))["text"]

                the_run.expect(RESPONSES, len(targets))
                generated = await asyncio.gather(*(respond(d, t) for d, t in targets))
                texts = {t.key: text for (_, t), text in zip(targets, generated, strict=True)}
                summary.system = config.system
            evaluated = [(d, t) for d, t in targets if t.key in texts]
            usable = [(d, t) for d, t in evaluated if (texts[t.key] or "").strip()]
            labelled = [(d, t) for d, t in usable if t.label_set]
            system_requests = [
                (f"{t.dialog_id}|{t.system_index}", d.context(t.index), texts[t.key] or "")
                for d, t in labelled
            ]
            system_labels = await label_all(SYSTEM_LABELS, system_requests)
            pairs_ba = [
                ({label}, t.label_set)
                for (_, t), label in zip(labelled, system_labels, strict=True)
                if label is not None
            ]
            summary.ba = behavior_alignment(pairs_ba, n_resamples=config.n_resamples, seed=config.seed)
            summary.responses = len(evaluated)
            summary.failed_responses = len(evaluated) - len(usable)
            summary.unlabelled_turns = len(usable) - len(labelled)
            summary.system_labeller_failures = len(labelled) - len(pairs_ba)
            summary.label_counts["system"] = _counts(system_labels)
            for (_, t), label in zip(labelled, system_labels, strict=True):
                store.put(
                    SYSTEM,
                    f"{t.dialog_id}|{t.system_index}",
                    {
                        "dialog_id": t.dialog_id,
                        "turn": t.system_index,
                        "response": texts[t.key],
                        "label": label,
                        "human": sorted(t.label_set),
                        "ba": None if label is None else ba({label}, t.label_set),
                    },
                )
        summary.failures = failures
        the_run.finish(summary)
        the_run.record(summary=summary.model_dump(mode="json"))
        return summary


run_sync = synchronous(run)
