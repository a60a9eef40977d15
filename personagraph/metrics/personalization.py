"""Personalization: persona consistency (C-Score), coherence (UE-Score), persona coverage.

* C-Score: each persona sentence (premise) against the response (hypothesis) through NLI — entailment
  +1, neutral 0, contradiction −1 — averaged over the persona's sentences, so it lies in [−1, 1]
  (Madotto et al. 2019 sum the same values; multiply by the number of sentences for theirs).
* UE-Score: NLI of persona → response and of reference → response: 2 when both entail the response,
  1 when only the persona does, else 0 (as PersoBench scores it).
* Persona coverage: mean cosine similarity between the response's embedding and each persona
  sentence's embedding (packaged all-MiniLM-L6-v2 by default).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from personagraph.embeddings import embed
from personagraph.metrics.nli import Entailment, NLIModel

C_VALUES = {Entailment.ENTAILMENT: 1.0, Entailment.NEUTRAL: 0.0, Entailment.CONTRADICTION: -1.0}


def c_scores(nli: NLIModel, responses: Sequence[str], personas: Sequence[Sequence[str]]) -> list[float]:
    """C-Score of each response against its persona sentences (mean of +1/0/−1 over the sentences).

    Args:
        nli: the NLI classifier.
        responses: non-empty responses.
        personas: each response's persona sentences (at least one each).
    """
    if any(not persona for persona in personas):
        raise ValueError("C-Score needs at least one persona sentence")
    pairs = [(sentence, response) for response, persona in zip(responses, personas, strict=True)
             for sentence in persona]
    outcomes = iter(nli.predict(pairs))
    return [sum(C_VALUES[next(outcomes)] for _ in persona) / len(persona) for persona in personas]


def ue_score(persona_entails: bool, reference_entails: bool) -> int:
    """UE-Score from the two entailment checks: 2 both, 1 persona only, 0 otherwise."""
    if persona_entails:
        return 2 if reference_entails else 1
    return 0


def ue_scores(
    nli: NLIModel, responses: Sequence[str], personas: Sequence[Sequence[str]], references: Sequence[str]
) -> list[int]:
    """UE-Score of each response: NLI(persona → response) and NLI(reference → response).

    The persona premise is its sentences joined by spaces.
    """
    n = len(responses)
    if not (len(personas) == len(references) == n):
        raise ValueError("responses, personas and references differ in length")
    pairs = [(" ".join(persona), response) for response, persona in zip(responses, personas, strict=True)]
    pairs += [(reference, response) for response, reference in zip(responses, references, strict=True)]
    outcomes = nli.predict(pairs)
    return [
        ue_score(outcomes[i] is Entailment.ENTAILMENT, outcomes[n + i] is Entailment.ENTAILMENT)
        for i in range(n)
    ]


def persona_coverage(
    responses: Sequence[str], personas: Sequence[Sequence[str]], *, model: str | None = None
) -> list[float]:
    """Mean cosine between each response and each of its persona sentences (sentence embeddings).

    Args:
        responses: non-empty responses.
        personas: each response's persona sentences (at least one each).
        model: sentence-transformers model; None for the packaged all-MiniLM-L6-v2.
    """
    if not responses:
        return []
    if any(not persona for persona in personas):
        raise ValueError("persona coverage needs at least one persona sentence")
    sentences = sorted({sentence for persona in personas for sentence in persona})
    index = {sentence: i for i, sentence in enumerate(sentences)}
    response_vectors = embed(list(responses), model)
    sentence_vectors = embed(sentences, model)
    scores = []
    for vector, persona in zip(response_vectors, personas, strict=True):
        rows = sentence_vectors[[index[sentence] for sentence in persona]]
        scores.append(float(np.mean(rows @ vector)))
    return scores
