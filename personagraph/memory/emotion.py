"""Emotion and scene cues for proactive recall, detected offline with the embedding model.

A memory's emotion label (MADial: Happy, Anxious, Sad, …) is mapped to a class and a short first-person
prototype sentence ("I feel nervous, worried and afraid."). The user's turns are compared with the
prototypes: the best-matching turn gives the emotion signal of each memory, and the best class is the
detected emotion. Scenes work the same way with scene prototypes. An LLM can replace the detection (the
memory dialogue graph does); the prototypes are the offline default.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from personagraph.embeddings import encode

# Label (lower case) → class. Unknown labels are their own class.
EMOTION_CLASS: dict[str, str] = {
    "happy": "happy",
    "joy": "happy",
    "joyful": "happy",
    "excited": "happy",
    "anticipation": "happy",
    "proud": "happy",
    "grateful": "happy",
    "neutral": "neutral",
    "calm": "neutral",
    "anxious": "anxious",
    "anxiety": "anxious",
    "fear": "anxious",
    "nervous": "anxious",
    "worried": "anxious",
    "scared": "anxious",
    "sad": "sad",
    "disappointed": "sad",
    "frustrated": "sad",
    "lonely": "sad",
    "upset": "sad",
    "angry": "angry",
    "annoyed": "angry",
}
EMOTION_PROTOTYPES: dict[str, str] = {
    "happy": "I feel happy, excited and joyful.",
    "neutral": "I feel okay.",
    "anxious": "I feel nervous, worried and afraid.",
    "sad": "I feel sad, upset and disappointed.",
    "angry": "I feel angry and annoyed.",
}
SCENE_PROTOTYPES: dict[str, str] = {
    "Activity": "We are talking about something I did, an activity or an event.",
    "Preferences": "We are talking about things I like, my favourite food, toys or hobbies.",
    "Emotional": "We are talking about my feelings and I need comfort.",
    "Others": "We are talking about everyday life.",
}


def emotion_class(label: str) -> str:
    """The class of an emotion label (``"Anxiety"`` → ``"anxious"``); empty → ``"neutral"``."""
    key = label.strip().lower()
    if not key:
        return "neutral"
    return EMOTION_CLASS.get(key, key)


def emotion_prototype(label: str) -> str:
    """The prototype sentence of an emotion label's class."""
    cls = emotion_class(label)
    return EMOTION_PROTOTYPES.get(cls, f"I feel {cls}.")


@lru_cache(maxsize=256)
def _prototype_vector(text: str, model_path: str | None) -> np.ndarray:
    return encode([text], model_path=model_path)[0]


def prototype_vectors(texts: list[str], model_path: str | None = None) -> np.ndarray:
    """Embeddings of prototype sentences (cached per process)."""
    return np.stack([_prototype_vector(t, model_path) for t in texts])


def emotion_affinity(
    turn_vectors: np.ndarray, labels: list[str], model_path: str | None = None
) -> np.ndarray:
    """For each memory emotion label: the best cosine between a user turn and the label's prototype."""
    if len(labels) == 0:
        return np.zeros(0, dtype=np.float32)
    if turn_vectors.size == 0:
        return np.zeros(len(labels), dtype=np.float32)
    protos = prototype_vectors([emotion_prototype(label) for label in labels], model_path)
    return (protos @ turn_vectors.T).max(axis=1)


def detect_emotion(turn_vectors: np.ndarray, model_path: str | None = None) -> tuple[str, dict[str, float]]:
    """The emotion class the user's turns are closest to, with every class's best cosine."""
    names = list(EMOTION_PROTOTYPES)
    if turn_vectors.size == 0:
        return "neutral", {name: 0.0 for name in names}
    sims = (prototype_vectors([EMOTION_PROTOTYPES[n] for n in names], model_path) @ turn_vectors.T).max(
        axis=1
    )
    scores = {name: float(s) for name, s in zip(names, sims, strict=True)}
    return max(scores, key=scores.__getitem__), scores


def detect_scene(turn_vectors: np.ndarray, model_path: str | None = None) -> tuple[str, dict[str, float]]:
    """The MADial scene the user's turns are closest to, with every scene's mean cosine."""
    names = list(SCENE_PROTOTYPES)
    if turn_vectors.size == 0:
        return "Others", {name: 0.0 for name in names}
    sims = (prototype_vectors([SCENE_PROTOTYPES[n] for n in names], model_path) @ turn_vectors.T).mean(axis=1)
    scores = {name: float(s) for name, s in zip(names, sims, strict=True)}
    return max(scores, key=scores.__getitem__), scores
