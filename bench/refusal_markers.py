"""Recall and false positives of ``judges/refusal_markers.yaml`` on persona breaks and in-character lines.

Reads ``bench/refusal_sentences.yaml`` (real assistant refusals and AI disclosures; in-character sentences
that use the same words) and prints recall on the refusals, the false-positive rate on the in-character
sentences, each with a 95% Wilson interval, and every sentence on the wrong side.

    .venv/bin/python bench/refusal_markers.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._harness import wilson_share  # noqa: E402
from personagraph.judges.refusal import detect_refusal  # noqa: E402

SENTENCES = Path(__file__).with_name("refusal_sentences.yaml")


def main() -> None:
    data = yaml.safe_load(SENTENCES.read_text(encoding="utf-8"))
    for label, texts, want in (("recall on refusals", data["refusals"], True),
                               ("false positives on in-character", data["in_character"], False)):
        hits = [t for t in texts if (detect_refusal(t) is not None) == want]
        count = len(hits) if want else len(texts) - len(hits)
        print(f"{label}: {wilson_share(count, len(texts))}")
        for text in texts:
            if (detect_refusal(text) is not None) != want:
                print(f"  wrong side: {text}")


if __name__ == "__main__":
    main()
