"""Judge meta-evaluation: every statistic checked against scipy / scikit-learn / krippendorff directly.

The judges are scripted test models (``register_script``) that reply with the human mean plus known
noise, so the expected agreement is computed independently from the same numbers.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import krippendorff
import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import cohen_kappa_score

from personagraph.errors import PersonagraphError
from personagraph.judges.meta_eval import (
    ENSEMBLE,
    OVERALL,
    CriterionCatalogue,
    MetaEvalConfig,
    load_items,
    map_scale,
    question_text,
)
from personagraph.judges.self_preference import family_of, self_preference
from personagraph.judges.stats import paired_bootstrap_ci
from personagraph.models.testing import register_script
from personagraph.resources import list_dir, read_yaml
from personagraph.runs.meta_eval import run as run_meta_eval
from personagraph.schemas import Answer, Verdict
from personagraph.store import RunStore

RESAMPLES = 300


async def meta_evaluate(config: MetaEvalConfig, run_dir: Path, **options: Any) -> dict[str, Any]:
    """The meta-eval run's summary as ``meta_eval.json`` holds it."""
    return (await run_meta_eval(config, run_dir, **options)).model_dump(mode="json")
RESPONSE = re.compile(r"\[BEGIN RESPONSE #(\w+)\]\n(.*?)\n\[END RESPONSE #\1\]", re.DOTALL)

# --- a synthetic items file with known judge behaviour --------------------------------------------

WARMTH_RUBRIC = """\
task: Warmth
scale: [0, 3]
criterion: How warm the response is.
scores:
  0: cold
  1: neutral
  2: warm
  3: very warm
"""


def _make_items(rng: np.random.Generator) -> list[dict[str, Any]]:
    items = []
    for index in range(40):  # expected_action, human scale 1..5, three raters, rubric scale 1..5
        quality = int(rng.integers(1, 6))
        ratings = [int(np.clip(quality + rng.integers(-1, 2), 1, 5)) for _ in range(3)]
        words = " ".join(["word"] * int(5 + 3 * quality + rng.integers(0, 8)))
        items.append(
            {
                "id": f"ea{index}",
                "persona": "a retired firefighter",
                "question": "What do you do?",
                "response": f"ea{index} {words}",
                "criterion": "Expected Action",
                "human": ratings,
            }
        )
    for index in range(20):  # a user rubric on 0..3 rated by humans on 1..10, one rating (no alpha)
        rating = int(rng.integers(1, 11))
        items.append(
            {
                "id": f"w{index}",
                "response": f"w{index} " + "hey " * int(rng.integers(1, 30)),
                "criterion": "warmth",
                "human": rating,
                "scale": [1, 10],
                "context": f"ctx{index}",
            }
        )
    return items


def _score_for(response: str, schema: dict[str, Any], noise: float, table: dict[str, dict[str, Any]]) -> int:
    item = table[response.split()[0]]
    low, high = schema["properties"]["score"]["minimum"], schema["properties"]["score"]["maximum"]
    scale = item.get("scale", [1, 5])
    human = float(np.mean(item["human"]))
    on_rubric = low + (human - scale[0]) * (high - low) / (scale[1] - scale[0])
    return int(np.clip(round(on_rubric + hash_noise(item["id"], noise)), low, high))


def hash_noise(key: str, scale: float) -> float:
    """Deterministic noise per item (the same in the script and in the expected values)."""
    seed = sum(ord(c) * (i + 1) for i, c in enumerate(key)) + int(scale * 1000)
    return float(np.random.default_rng(seed).normal(0, scale))


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("meta")
    items = _make_items(np.random.default_rng(11))
    table = {it["id"]: it for it in items}
    broken = {"ea3", "ea17", "w5"}
    seen_contexts: list[str] = []

    def judge(noise: float, fail: frozenset[str] = frozenset()) -> Any:
        def script(messages: list[dict[str, Any]], schema: dict[str, Any] | None) -> str:
            text = messages[1]["content"]  # the judge prompt's user message (a format retry appends after it)
            response = RESPONSE.search(text).group(2)
            seen_contexts.append(text)
            if response.split()[0] in fail:
                return "no JSON here"
            return json.dumps({"rationale": "scripted", "score": _score_for(response, schema, noise, table)})

        return script

    register_script("meta-close", judge(0.4))
    register_script("meta-far", judge(1.2, frozenset(broken)))
    path = folder / "items.jsonl"
    path.write_text("\n".join(json.dumps(it) for it in items) + "\n", encoding="utf-8")
    rubric = folder / "warmth.yaml"
    rubric.write_text(WARMTH_RUBRIC, encoding="utf-8")
    run_dir = folder / "run"
    config = MetaEvalConfig(
        items=str(path),
        judges=["test:meta-close", "test:meta-far"],
        rubric_files=[str(rubric)],
        n_resamples=RESAMPLES,
        seed=3,
    )
    summary = asyncio.run(meta_evaluate(config, run_dir))
    return {
        "items": items,
        "table": table,
        "broken": broken,
        "summary": summary,
        "config": config,
        "run_dir": run_dir,
        "path": path,
        "rubric": rubric,
        "contexts": seen_contexts,
    }


def _expected_scores(
    data: dict[str, Any], noise: float, criterion: str, target: tuple[int, int], fail: set[str] = frozenset()
) -> tuple[list[float], list[float], list[str], list[Any]]:
    """Judge scores mapped onto ``target`` and human means, computed independently of the module."""
    judge, human, texts, raw = [], [], [], []
    for item in data["items"]:
        key = "expected_action" if item["criterion"] == "Expected Action" else item["criterion"]
        if criterion not in (key, OVERALL) or item["id"] in fail:
            continue
        rubric_scale = (1, 5) if key == "expected_action" else (0, 3)
        scale = tuple(item.get("scale", [1, 5]))
        schema = {"properties": {"score": {"minimum": rubric_scale[0], "maximum": rubric_scale[1]}}}
        score = _score_for(item["response"], schema, noise, data["table"])
        on_human = scale[0] + (score - rubric_scale[0]) * (scale[1] - scale[0]) / (
            rubric_scale[1] - rubric_scale[0]
        )
        judge.append(target[0] + (on_human - scale[0]) * (target[1] - target[0]) / (scale[1] - scale[0]))
        human.append(
            target[0]
            + (float(np.mean(item["human"])) - scale[0]) * (target[1] - target[0]) / (scale[1] - scale[0])
        )
        texts.append(item["response"])
        raw.append(item["human"])
    return judge, human, texts, raw


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    return float(stats.spearmanr(x, y).statistic)


@pytest.mark.parametrize(
    ("criterion", "target"), [("expected_action", (1, 5)), ("warmth", (1, 10)), (OVERALL, (1, 5))]
)
@pytest.mark.parametrize(
    ("judge", "noise", "failing"), [("test:meta-close", 0.4, False), ("test:meta-far", 1.2, True)]
)
def test_every_statistic_matches_the_libraries(
    synthetic: dict[str, Any],
    criterion: str,
    target: tuple[int, int],
    judge: str,
    noise: float,
    failing: bool,
) -> None:
    fail = synthetic["broken"] if failing else set()
    scores, human, texts, _ = _expected_scores(synthetic, noise, criterion, target, fail)
    row = synthetic["summary"]["results"][criterion]["judges"][judge]
    j, h = np.array(scores), np.array(human)
    assert row["n"] == len(scores)
    assert row["failed"] == len(
        {
            i
            for i in fail
            if (criterion == OVERALL or i.startswith("ea" if criterion == "expected_action" else "w"))
        }
    )
    assert row["spearman"]["value"] == pytest.approx(stats.spearmanr(j, h).statistic)
    assert row["kendall"]["value"] == pytest.approx(stats.kendalltau(j, h).statistic)
    labels = list(range(target[0], target[1] + 1))
    kappa = cohen_kappa_score(
        np.clip(np.rint(j), *target).astype(int),
        np.clip(np.rint(h), *target).astype(int),
        labels=labels,
        weights="quadratic",
    )
    assert row["quadratic_kappa"]["value"] == pytest.approx(kappa)
    assert row["mae"]["value"] == pytest.approx(np.mean(np.abs(j - h)))
    assert row["bias"] == pytest.approx(np.mean(j - h))
    lengths = np.array([len(t.split()) for t in texts])
    assert row["length_correlation"]["value"] == pytest.approx(stats.spearmanr(j, lengths).statistic)
    # The CI code path: the paired bootstrap over items, with the run's seed and resamples.
    low, high = paired_bootstrap_ci(j, h, _spearman, n_resamples=RESAMPLES, seed=3)
    assert (row["spearman"]["ci_low"], row["spearman"]["ci_high"]) == pytest.approx((low, high))
    # (that these equal scipy's per-resample loop is checked for every metric in the test below)
    for metric in ("spearman", "kendall", "quadratic_kappa", "mae", "length_correlation"):
        estimate = row[metric]
        assert estimate["ci_low"] <= estimate["value"] <= estimate["ci_high"], metric


@pytest.mark.parametrize(("criterion", "target"), [("expected_action", (1, 5)), ("warmth", (1, 10))])
def test_vectorised_intervals_equal_the_per_resample_library_loop(
    synthetic: dict[str, Any], criterion: str, target: tuple[int, int]
) -> None:
    """Every CI (vectorised over resamples) equals scipy's bootstrap calling the library statistic once per
    resample: the same draws, the same BCa, so the same interval."""
    scores, human, texts, _ = _expected_scores(synthetic, 1.2, criterion, target, synthetic["broken"])
    row = synthetic["summary"]["results"][criterion]["judges"]["test:meta-far"]
    j, h = np.array(scores), np.array(human)
    lengths = np.array([len(t.split()) for t in texts], dtype=float)
    labels = list(range(target[0], target[1] + 1))

    def kappa(x: np.ndarray, y: np.ndarray) -> float:
        a, b = (np.clip(np.rint(v), *target).astype(int) for v in (x, y))
        return float(cohen_kappa_score(a, b, labels=labels, weights="quadratic"))

    loops = {
        "spearman": (h, _spearman),
        "kendall": (h, lambda x, y: float(stats.kendalltau(x, y).statistic)),
        "quadratic_kappa": (h, kappa),
        "mae": (h, lambda x, y: float(np.mean(np.abs(x - y)))),
        "length_correlation": (lengths, _spearman),
    }
    for metric, (other, statistic) in loops.items():
        with np.errstate(divide="ignore", invalid="ignore"):
            direct = stats.bootstrap(
                (j, other),
                statistic,
                paired=True,
                vectorized=False,
                n_resamples=RESAMPLES,
                method="BCa",
                rng=np.random.default_rng(3),
            ).confidence_interval
        assert (row[metric]["ci_low"], row[metric]["ci_high"]) == pytest.approx(
            (direct.low, direct.high), rel=1e-9, abs=1e-12
        ), metric


def test_known_correlations(synthetic: dict[str, Any]) -> None:
    """The close judge agrees strongly, the noisy one less; the design is visible in the numbers."""
    results = synthetic["summary"]["results"]["expected_action"]["judges"]
    close, far = results["test:meta-close"], results["test:meta-far"]
    assert close["spearman"]["value"] > 0.85
    assert close["spearman"]["value"] > far["spearman"]["value"]
    assert close["mae"]["value"] < far["mae"]["value"]
    assert close["spearman"]["ci_low"] > 0.5


@pytest.mark.parametrize(("criterion", "target"), [("expected_action", (1, 5)), (OVERALL, (1, 5))])
def test_ensemble_is_the_mean_of_parsed_judges(
    synthetic: dict[str, Any], criterion: str, target: tuple[int, int]
) -> None:
    close, human, _, _ = _expected_scores(synthetic, 0.4, criterion, target)
    ids = [
        it["id"] for it in synthetic["items"] if criterion == OVERALL or it["criterion"] == "Expected Action"
    ]
    far_all, _, _, _ = _expected_scores(synthetic, 1.2, criterion, target)
    ensemble = [
        c if i in synthetic["broken"] else (c + f) / 2 for i, c, f in zip(ids, close, far_all, strict=True)
    ]
    row = synthetic["summary"]["results"][criterion]["judges"][ENSEMBLE]
    assert row["n"] == len(ids) and row["failed"] == 0
    assert row["spearman"]["value"] == pytest.approx(stats.spearmanr(ensemble, human).statistic)
    assert row["mae"]["value"] == pytest.approx(np.mean(np.abs(np.array(ensemble) - np.array(human))))


def test_krippendorff_alpha_of_the_humans(synthetic: dict[str, Any]) -> None:
    _, _, _, raw = _expected_scores(synthetic, 0.4, "expected_action", (1, 5))
    matrix = np.array(raw, dtype=float).T  # raters x items
    expected = krippendorff.alpha(reliability_data=matrix, level_of_measurement="ordinal")
    human = synthetic["summary"]["results"]["expected_action"]["human"]
    assert human["krippendorff_alpha"] == pytest.approx(expected)
    assert human["n_multi_rated"] == 40
    assert synthetic["summary"]["results"]["warmth"]["human"]["krippendorff_alpha"] is None
    overall = synthetic["summary"]["results"][OVERALL]
    assert overall["human"]["krippendorff_alpha"] is None and "different human scales" in overall["note"]


def test_failed_verdicts_are_counted_never_zero(synthetic: dict[str, Any]) -> None:
    summary = synthetic["summary"]
    assert summary["failed_verdicts"] == 3
    store = RunStore(synthetic["run_dir"], readonly=True)
    try:
        failed = [v for v in store.records("meta_verdict") if v["status"] == "failed"]
        assert {v["item_id"] for v in failed} == synthetic["broken"]
        assert all(v["score"] is None and v["raw"] == "no JSON here" for v in failed)
        assert store.get_meta("kind") == "meta-eval"
    finally:
        store.close()


def test_summary_file_and_criteria(synthetic: dict[str, Any]) -> None:
    written = json.loads((synthetic["run_dir"] / "meta_eval.json").read_text())
    assert written["results"] == json.loads(json.dumps(synthetic["summary"]["results"]))
    criteria = written["criteria"]
    assert criteria["expected_action"] == {
        "criterion": "expected_action",
        "name": "Expected Action",
        "source": "task",
        "rubric_scale": [1, 5],
        "n_records": 40,
        "scale": [1, 5],
    }
    assert criteria["warmth"]["source"] == str(synthetic["rubric"]) and criteria["warmth"]["scale"] == [1, 10]


def test_context_reaches_the_judge(synthetic: dict[str, Any]) -> None:
    assert any("(context) ctx7\n" in text for text in synthetic["contexts"])


def test_resume_makes_no_calls(synthetic: dict[str, Any]) -> None:
    again = asyncio.run(meta_evaluate(synthetic["config"], synthetic["run_dir"]))
    assert again["llm_calls"] == 0
    assert again["results"] == synthetic["summary"]["results"]


def test_resume_asks_again_after_a_transport_failure(tmp_path: Path) -> None:
    state = {"down": True}

    def script(messages: list[dict[str, Any]], schema: dict[str, Any] | None) -> str:
        if state["down"]:
            raise RuntimeError("endpoint gone")
        return json.dumps({"rationale": "ok", "score": 4})

    register_script("meta-outage", script)
    path = tmp_path / "items.jsonl"
    path.write_text(
        '{"id": "a", "response": "x", "criterion": "toxicity", "human": 4}\n'
        '{"id": "b", "response": "y", "criterion": "toxicity", "human": 2}\n'
    )
    config = MetaEvalConfig(items=str(path), judges=["test:meta-outage"], n_resamples=RESAMPLES)
    first = asyncio.run(meta_evaluate(config, tmp_path / "run"))
    assert first["failed_verdicts"] == 2 and first["results"][OVERALL]["judges"]["test:meta-outage"]["n"] == 0
    state["down"] = False
    second = asyncio.run(meta_evaluate(config, tmp_path / "run"))
    assert second["llm_calls"] == 2 and second["failed_verdicts"] == 0
    assert asyncio.run(meta_evaluate(config, tmp_path / "run"))["llm_calls"] == 0


def test_criteria_filter(synthetic: dict[str, Any], tmp_path: Path) -> None:
    config = synthetic["config"].model_copy(update={"criteria": ["warmth"]})
    summary = asyncio.run(meta_evaluate(config, synthetic["run_dir"]))
    assert list(summary["criteria"]) == ["warmth"] and summary["llm_calls"] == 0
    assert summary["results"][OVERALL] == summary["results"]["warmth"]


def test_map_scale() -> None:
    assert map_scale(1, (1, 5), (0, 3)) == 0
    assert map_scale(5, (1, 5), (0, 3)) == 3
    assert map_scale(3, (1, 5), (0, 3)) == 1.5
    assert map_scale(2, (0, 3), (1, 10)) == 7
    assert map_scale(4, (1, 5), (1, 5)) == 4


# --- criteria and items files --------------------------------------------------------------------


def test_catalogue_knows_tasks_packaged_rubrics_and_files(tmp_path: Path) -> None:
    rubric = tmp_path / "my_warmth.yaml"
    rubric.write_text(WARMTH_RUBRIC)
    catalogue = CriterionCatalogue([rubric])
    for name in ("Expected Action", "expected_action", "expected-action", "TOXICITY", "Toxicity Control"):
        assert catalogue.resolve(name) is not None, name
    assert catalogue.resolve("toxicity").key == "toxicity_control"
    for file in list_dir("judges/rubrics"):  # read at run time: new rubric files are known
        if not file.endswith(".yaml"):
            continue
        if "scores" in read_yaml(f"judges/rubrics/{file}"):
            assert catalogue.resolve(file[:-5]).key == file[:-5]
            assert file[:-5] in catalogue.names()
        else:  # e.g. a pick-the-best rubric: refused by name, not "unknown"
            with pytest.raises(
                PersonagraphError, match="rubric without scores; meta-eval needs a scored rubric"
            ):
                catalogue.resolve(file[:-5])
            assert file[:-5] not in catalogue.names()
    assert catalogue.resolve("my_warmth").rubric.scale == (0, 3)
    assert catalogue.resolve("Warmth").key == "my_warmth"
    assert catalogue.resolve("nonsense") is None


def test_csv_matches_jsonl(tmp_path: Path) -> None:
    jsonl = tmp_path / "items.jsonl"
    jsonl.write_text(
        '{"id": "1", "persona": "p", "question": "q", "response": "r, with a comma", '
        '"criterion": "expected_action", "human": [4, 5, 3]}\n'
        '{"id": "2", "response": "s", "criterion": "expected_action", "human": 2, "scale": [1, 5]}\n'
        '\n{"id": "3", "response": "t", "criterion": "expected_action", "human": [5, null, 4]}\n'
    )
    csv_file = tmp_path / "items.csv"
    csv_file.write_text(
        "id,persona,question,response,criterion,human,scale\n"
        '1,p,q,"r, with a comma",expected_action,4;5;3,\n'
        "2,,,s,expected_action,2,1;5\n"
        '3,,,t,expected_action,"[5, 4]",[1;5]\n'.replace("[1;5]", '"[1, 5]"')
    )
    catalogue = CriterionCatalogue()
    from_json, from_csv = load_items(jsonl, catalogue), load_items(csv_file, catalogue)
    assert [i.model_dump(exclude={"row"}) for i in from_json] == [
        i.model_dump(exclude={"row"}) for i in from_csv
    ]
    assert from_json[0].human == [4, 5, 3] and from_json[2].human == [5, 4]
    assert [i.key for i in from_json] == [i.key for i in from_csv]


def test_question_text_puts_context_first() -> None:
    from personagraph.judges.meta_eval import MetaItem

    item = MetaItem(id="a", criterion="x", response="r", human=[1], scale=(1, 5), context="hi", question="q?")
    assert question_text(item) == "(context) hi\nq?"
    assert question_text(item.model_copy(update={"context": ""})) == "q?"


BAD = [
    ('{"id": "1", "response": "r", "human": 3}', "row 1: missing column 'criterion'"),
    ('{"id": "1", "response": "r", "criterion": "expected_action"}', "row 1: missing column 'human'"),
    ('{"id": "1", "response": "r", "criterion": "expected_action", "human": null}', "row 1: human: empty"),
    (
        '{"id": "1", "response": "r", "criterion": "nope", "human": 3}',
        "row 1 (id 1): unknown criterion 'nope'",
    ),
    (
        '{"id": "1", "response": "r", "criterion": "expected_action", "human": 6}',
        "row 1 (id 1): human rating 6 is outside the scale [1, 5]",
    ),
    (
        '{"id": "1", "response": "r", "criterion": "expected_action", "human": 3, "scale": [5, 1]}',
        "row 1 (id 1): scale: [5, 1]: min must be below max",
    ),
    (
        '{"id": "1", "response": "r", "criterion": "expected_action", "human": 3, "scale": [1, 4.5]}',
        "row 1 (id 1): scale: [1, 4.5]: bounds must be integers",
    ),
    (
        '{"id": "1", "response": "r", "criterion": "expected_action", "human": 3, "scale": [1]}',
        "row 1 (id 1): scale: [1] is not [min, max]",
    ),
    (
        '{"id": "1", "response": "r", "criterion": "expected_action", "human": "lots"}',
        "row 1 (id 1): human: 'lots' is not a number",
    ),
    (
        '{"id": "1", "response": "r", "criterion": "expected_action", "human": [true]}',
        "row 1 (id 1): human: True is not a number",
    ),
    (
        '{"id": "1", "response": "r", "criterion": "expected_action", "human": []}',
        "row 1 (id 1): human: no rating",
    ),
    (
        '{"id": "1", "response": 5, "criterion": "expected_action", "human": 3}',
        "row 1: response: expected text, got int",
    ),
    (
        '{"id": "1", "response": "r", "criterion": "expected_action", "human": 3}\n{"id": ',
        "items.jsonl:2: invalid JSON",
    ),
    ("[1, 2]", "items.jsonl:1: expected a JSON object, got array"),
    (
        (
            '{"id": "1", "response": "r", "criterion": "expected_action", "human": 3}\n'
            '{"id": "1", "response": "r2", "criterion": "Expected Action", "human": 3}'
        ),
        "row 2 (id 1): duplicate id for criterion expected_action",
    ),
    (
        (
            '{"id": "1", "response": "r", "criterion": "expected_action", "human": 3}\n'
            '{"id": "2", "response": "r2", "criterion": "expected_action", "human": 3, "scale": [1, 7]}'
        ),
        "row 2 (id 2): scale [1, 7] differs from the scale [1, 5] of earlier expected_action records",
    ),
    (
        '{"id": "1", "response": "I ride.", "criterion": "expected_action", "human": 3, '
        '"contradiction": " I  ride."}',
        "row 1 (id 1): contradiction: the response itself, not a contradiction of it",
    ),
    (
        '{"id": "1", "response": "I ride.", "criterion": "expected_action", "human": 3, "contradiction": 7}',
        "row 1: contradiction: expected text, got int",
    ),
    ("\n\n", "no records"),
]


@pytest.mark.parametrize(("content", "message"), BAD)
def test_bad_jsonl_names_file_and_row(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "items.jsonl"
    path.write_text(content + "\n")
    with pytest.raises(PersonagraphError) as error:
        load_items(path, CriterionCatalogue())
    # "{path}: row N: ..." from the validation, "{path}:N: ..." from the JSONL reader
    assert str(error.value).startswith(f"{path}:")
    assert message in str(error.value)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("id,response,criterion\n1,r,expected_action\n", "row 1 (header): missing column 'human'"),
        ("id,response,criterion,human\n1,r,expected_action,4\n2,r,expected_action,\n", "row 3: human: empty"),
        (
            "id,response,criterion,human\n1,r,expected_action,4;x\n",
            "row 2 (id 1): human: 'x' is not a number",
        ),
        ("id,response,criterion,human,scale\n1,r,expected_action,4,1-5\n", "row 2 (id 1): scale:"),
        (
            "id,response,criterion,human\n1,r,expected_action,4,extra\n",
            "row 2: more cells than header columns",
        ),
    ],
)
def test_bad_csv_names_file_and_row(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "items.csv"
    path.write_text(content)
    with pytest.raises(PersonagraphError, match=re.escape(message)):
        load_items(path, CriterionCatalogue())


def test_unknown_criteria_filter_and_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "items.jsonl"
    path.write_text('{"id": "1", "response": "r", "criterion": "expected_action", "human": 3}\n')
    with pytest.raises(PersonagraphError, match="--criteria: unknown criterion 'nope'"):
        asyncio.run(
            meta_evaluate(
                MetaEvalConfig(items=str(path), judges=["test:a"], criteria=["nope"]), tmp_path / "run"
            )
        )
    with pytest.raises(PersonagraphError, match="has no records for toxicity_control"):
        asyncio.run(
            meta_evaluate(
                MetaEvalConfig(items=str(path), judges=["test:a"], criteria=["toxicity"]), tmp_path / "run"
            )
        )
    with pytest.raises(PersonagraphError, match=r"missing.jsonl: no such file$"):
        load_items(tmp_path / "missing.jsonl", CriterionCatalogue())


def test_refuses_a_run_dir_of_another_kind(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "run")
    store.set_meta("kind", "eval")
    store.close()
    path = tmp_path / "items.jsonl"
    path.write_text('{"id": "1", "response": "r", "criterion": "expected_action", "human": 3}\n')
    with pytest.raises(PersonagraphError, match="holds a run of kind .eval., not meta-eval"):
        asyncio.run(meta_evaluate(MetaEvalConfig(items=str(path), judges=["test:a"]), tmp_path / "run"))


# --- self-preference ---------------------------------------------------------------------------


def make_eval_run(run_dir: Path, bonus: float = 1.0) -> dict[str, Any]:
    """An eval run with two agent families and two judges; ``test:alpha-judge`` adds ``bonus`` to its own
    family's answers, ``test:delta-judge`` (a family with no agent) is fair. Quality differs by question
    and by model."""
    rng = np.random.default_rng(5)
    store = RunStore(run_dir)
    store.set_meta("kind", "eval")
    models = ["test:alpha-agent", "test:beta-agent", "test:gamma-agent"]
    truth: dict[str, float] = {}
    answers: dict[str, Answer] = {}
    for q in range(30):
        difficulty = rng.normal(0, 0.6)
        for m, model in enumerate(models):
            answer = Answer(
                id=f"a{q}-{m}",
                question_id=f"q{q}",
                persona_id="p",
                task="Expected Action",
                model=model,
                status="ok",
                text="text",
            )
            store.put("answer", answer.id, answer)
            answers[answer.id] = answer
            truth[answer.id] = 3 + difficulty + (0.3 if m == 0 else 0) + rng.normal(0, 0.5)
    scores: dict[tuple[str, str], int] = {}
    for answer in answers.values():
        for judge in ("test:alpha-judge", "test:delta-judge"):
            own = judge == "test:alpha-judge" and answer.model == "test:alpha-agent"
            value = int(np.clip(round(truth[answer.id] + (bonus if own else 0)), 1, 5))
            failed = judge == "test:delta-judge" and answer.id == "a0-1"
            scores[(judge, answer.id)] = value
            verdict = Verdict(
                id=f"{judge}-{answer.id}",
                answer_id=answer.id,
                judge=judge,
                status="failed" if failed else "ok",
                score=None if failed else value,
            )
            store.put("verdict", verdict.id, verdict)
    store.close()
    return {"answers": answers, "scores": scores}


def test_family_of() -> None:
    assert family_of("local:qwen2.5-coder-1.5b") == family_of("local:qwen2.5-coder-0.5b") == "qwen2.5"
    assert family_of("openai:gpt-4o-mini") == "gpt"
    assert family_of("my.module:Agent") == "my.module:agent"


def test_self_preference_against_scipy(tmp_path: Path) -> None:
    data = make_eval_run(tmp_path / "eval")
    result = self_preference(tmp_path / "eval", seed=2, n_resamples=RESAMPLES)
    rows = {r["judge"]: r for r in result["judges"]}
    alpha, beta = rows["test:alpha-judge"], rows["test:delta-judge"]
    assert alpha["own_models"] == ["test:alpha-agent"] and beta["own_models"] == []
    assert beta["note"] == "no answers of its own family" and beta["unpaired"] is None
    assert alpha["verdicts"] == 90 and alpha["failed"] == 0 and beta["failed"] == 1

    answers, scores = data["answers"], data["scores"]
    own = [scores[("test:alpha-judge", a.id)] for a in answers.values() if a.model == "test:alpha-agent"]
    other = [scores[("test:alpha-judge", a.id)] for a in answers.values() if a.model != "test:alpha-agent"]
    unpaired = alpha["unpaired"]
    assert unpaired["gap"] == pytest.approx(np.mean(own) - np.mean(other))
    assert unpaired["p_value"] == pytest.approx(
        stats.mannwhitneyu(own, other, alternative="two-sided").pvalue
    )
    direct = stats.bootstrap(
        (np.array(own, float), np.array(other, float)),
        lambda a, b, axis=-1: np.mean(a, axis=axis) - np.mean(b, axis=axis),
        n_resamples=RESAMPLES,
        method="BCa",
        rng=np.random.default_rng(2),
    ).confidence_interval
    assert (unpaired["ci_low"], unpaired["ci_high"]) == pytest.approx((direct.low, direct.high))

    own_q = [scores[("test:alpha-judge", f"a{q}-0")] for q in range(30)]
    other_q = [np.mean([scores[("test:alpha-judge", f"a{q}-{m}")] for m in (1, 2)]) for q in range(30)]
    paired = alpha["paired"]
    assert paired["gap"] == pytest.approx(np.mean(np.subtract(own_q, other_q)))
    assert paired["p_value"] == pytest.approx(stats.wilcoxon(own_q, other_q).pvalue)
    assert paired["ci_low"] <= paired["gap"] <= paired["ci_high"]

    # Controlled: the alpha judge's excess over the fair judge is ~ the bonus on its own family only.
    delta = {
        a.id: scores[("test:alpha-judge", a.id)] - scores[("test:delta-judge", a.id)]
        for a in answers.values()
        if a.id != "a0-1"
    }
    own_d = [d for k, d in delta.items() if answers[k].model == "test:alpha-agent"]
    other_d = [d for k, d in delta.items() if answers[k].model != "test:alpha-agent"]
    controlled = alpha["controlled"]
    assert controlled["gap"] == pytest.approx(np.mean(own_d) - np.mean(other_d))
    assert controlled["gap"] == pytest.approx(1.0, abs=0.2)
    assert controlled["ci_low"] > 0


def test_self_preference_none_when_fair(tmp_path: Path) -> None:
    make_eval_run(tmp_path / "eval", bonus=0.0)
    alpha = self_preference(tmp_path / "eval", ["test:alpha-judge"], n_resamples=RESAMPLES)["judges"][0]
    assert alpha["controlled"]["gap"] == pytest.approx(0.0)
    assert alpha["controlled"]["ci_low"] == alpha["controlled"]["ci_high"] == 0.0


def test_self_preference_errors(tmp_path: Path) -> None:
    make_eval_run(tmp_path / "eval")
    with pytest.raises(PersonagraphError, match="judge test:nobody has no verdicts there"):
        self_preference(tmp_path / "eval", ["test:nobody"])
    with pytest.raises(PersonagraphError, match="not a run directory"):
        self_preference(tmp_path / "nothing")
    empty = RunStore(tmp_path / "empty")
    empty.close()
    with pytest.raises(PersonagraphError, match="no judged answers"):
        self_preference(tmp_path / "empty")


def test_context_as_dialogue_turns(tmp_path: Path) -> None:
    path = tmp_path / "items.jsonl"
    path.write_text(
        json.dumps(
            {
                "id": "1",
                "response": "r",
                "criterion": "expected_action",
                "human": 3,
                "context": [
                    "hello",
                    {"role": "user", "content": "I feel sad"},
                    {"speaker": "bot", "text": "why?"},
                    {"other": 1},
                ],
            }
        )
        + "\n"
    )
    item = load_items(path, CriterionCatalogue())[0]
    assert item.context == 'hello\nuser: I feel sad\nbot: why?\n{"other": 1}'


def test_subpoints_are_shown_to_the_judge(tmp_path: Path) -> None:
    rubric = tmp_path / "tidy.yaml"
    rubric.write_text(
        "task: Tidiness\nkind: subpoints\nscale: [0, 3]\ncriterion: Is it tidy?\n"
        "subpoints:\n  - short sentences\n  - No typos: none at all\n  - one topic\n"
        "scores: {0: none hold, 1: one holds, 2: two hold, 3: all hold}\n"
    )
    text = CriterionCatalogue([rubric]).resolve("tidiness").rubric.text()
    assert (
        "Is it tidy? Sub-points, one point each when it clearly holds: "
        "(1) short sentences (2) No typos: none at all (3) one topic" in text
    )
    plain = CriterionCatalogue().resolve("expected_action").rubric
    assert "Sub-points" not in plain.text()


def test_unscored_criterion_in_items_names_the_row(tmp_path: Path) -> None:
    packaged = [f[:-5] for f in list_dir("judges/rubrics") if f.endswith(".yaml")]
    unscored = next((k for k in packaged if "scores" not in read_yaml(f"judges/rubrics/{k}.yaml")), None)
    if unscored is None:
        pytest.skip("every packaged rubric is scored")
    path = tmp_path / "items.jsonl"
    path.write_text(json.dumps({"id": "1", "response": "r", "criterion": unscored, "human": 1}) + "\n")
    with pytest.raises(
        PersonagraphError, match=rf"{re.escape(str(path))}: row 1 \(id 1\): criterion '{unscored}'"
    ):
        load_items(path, CriterionCatalogue())


def test_probability_weighted_scores_get_their_own_row(synthetic: dict[str, Any]) -> None:
    """The test judges return logprobs: each judge has an '(expected)' row beside its integer one."""
    run = RunStore(synthetic["run_dir"], readonly=True)
    verdicts = [v for v in run.records("meta_verdict") if v["judge"] == "test:meta-close"
                and v["criterion"] == "expected_action"]
    assert verdicts and all(v["expected_score"] is not None for v in verdicts if v["status"] == "ok")
    section = synthetic["summary"]["results"]["expected_action"]["judges"]
    integer, expected = section["test:meta-close"], section["test:meta-close (expected)"]
    assert expected["n"] == integer["n"] and expected["failed"] == integer["failed"]
    scores = [v["expected_score"] for v in verdicts if v["status"] == "ok"]
    assert expected["mean"] == pytest.approx(float(np.mean(scores)))
    assert expected["mean"] != integer["mean"]  # the test models spread probability over neighbouring scores
