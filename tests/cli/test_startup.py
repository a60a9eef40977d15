"""Starting the CLI imports no heavy library that only some commands use: every command, `--help`
included, would pay for it before doing anything (scikit-learn with pandas and scipy.stats cost ~1.2 s
of a 3–4 s start on 2 cores; torch, transformers and chromadb more)."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("sklearn", "pandas", "scipy.stats", "torch", "transformers", "chromadb", "sentence_transformers")

# In a fresh interpreter (in this one other tests have imported them already): the heavy modules loaded by
# importing the CLI, then the results of the functions that import them where they are used.
PROBE = f"""
import json, sys
import numpy as np
import personagraph.cli
loaded = [m for m in {list(HEAVY)!r} if m in sys.modules]
from personagraph.judges.words import content_words
from personagraph.judges.self_preference import paired_gap, unpaired_gap
from personagraph.judges.stats import spearman
from personagraph.judges.validity import roc_auc
from personagraph.metrics.behavior import cohen_kappa
print(json.dumps({{
    "loaded": loaded,
    "content_words": sorted(content_words("The horses and the ranch")),
    "spearman": float(spearman(np.array([1.0, 2, 3]), np.array([3.0, 5, 9]))),
    "roc_auc": roc_auc([3.0, 4.0], [1.0, 2.0]),
    "paired_p": paired_gap([3.0, 4.0, 5.0], [1.0, 2.0, 2.5]).p_value,
    "unpaired_p": unpaired_gap([3.0, 4.0, 5.0], [1.0, 2.0, 2.5]).p_value,
    "kappa": cohen_kappa(["a", "b", "a"], ["a", "b", "a"]).value,
}}))
"""


def test_the_cli_starts_without_heavy_libraries_and_imports_them_where_used():
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found.pop("loaded") == []
    assert found["content_words"] == ["horses", "ranch"]  # "the", "and": scikit-learn's stop words
    assert found["spearman"] == 1.0
    assert found["roc_auc"] == 1.0
    assert 0 < found["paired_p"] <= 1 and 0 < found["unpaired_p"] <= 1
    assert found["kappa"] == 1.0
