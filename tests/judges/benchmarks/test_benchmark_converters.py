"""The benchmarks' converters on the development halves in ../shared (the upstream formats, fewer records)
and on small records written here: what the judge reads, the human scales, pairs, the reference judge."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from personagraph.errors import PersonagraphError
from personagraph.judges.benchmarks import BENCHMARKS, load, resolve, stratified_sample
from personagraph.judges.benchmarks.characterbench import dialogue
from personagraph.judges.meta_eval import CriterionCatalogue
from personagraph.judges.stats import spearman
from personagraph.judges.words import content_words

RAW = Path(__file__).resolve().parents[4] / "shared" / "benchmarks" / "judge-dev" / "raw"
needs_dev = pytest.mark.skipif(
    not RAW.is_dir(), reason="../shared/benchmarks/judge-dev/raw is not beside the project"
)


def test_groups_expand_and_unknown_names_are_refused() -> None:
    assert [b.name for b in resolve(["persona"])] == ["characterbench", "usr-personachat", "persona-swap"]
    assert [b.name for b in resolve(["usr-personachat,persona"])] == [
        "usr-personachat",
        "characterbench",
        "persona-swap",
    ]
    with pytest.raises(PersonagraphError, match="unknown benchmark 'charbench'"):
        resolve(["charbench"])


def test_every_subset_names_a_criterion_meta_eval_knows() -> None:
    catalogue = CriterionCatalogue()
    for benchmark in BENCHMARKS.values():
        for subset in benchmark.subsets:
            criterion = catalogue.resolve(subset.criterion)
            assert criterion is not None and criterion.key == subset.criterion


@needs_dev
def test_the_development_halves_convert_with_their_sizes_scales_and_reference() -> None:
    loaded = load(resolve(["persona"]), benchmark_dir=RAW)
    by_group: dict[str, list] = {}
    for item in loaded.items:
        by_group.setdefault(item.group, []).append(item)
    sizes = {group: len(items) for group, items in by_group.items()}
    assert sizes["characterbench/attribute_bot"] == 126 and sizes["characterbench/attribute_human"] == 138
    assert sizes["characterbench/behavior"] == 118
    assert sizes["usr-personachat/uses_knowledge"] == sizes["usr-personachat/overall"] == 150
    bot = by_group["characterbench/attribute_bot"]
    assert all(
        i.scale == (1, 4) and i.persona and i.question.splitlines()[-1].startswith("User1: ") for i in bot
    )
    # CharacterJudge's reference-free predictions, as the data's README reports them (ρ 0.69 / 0.56 / 0.11)
    for group, expected in (
        ("characterbench/attribute_bot", 0.69),
        ("characterbench/attribute_human", 0.56),
        ("characterbench/behavior", 0.11),
    ):
        items = by_group[group]
        rho = spearman(np.array([i.reference for i in items]), np.array([i.human_mean for i in items]))
        assert rho == pytest.approx(expected, abs=0.01)
    # a USR reply is the same item in both subsets: judged once, read against both ratings
    knowledge = {i.key for i in by_group["usr-personachat/uses_knowledge"]}
    assert knowledge == {i.key for i in by_group["usr-personachat/overall"]}
    pairs = by_group["persona-swap/pairs"]
    assert len(pairs) % 2 == 0 and len(pairs) >= 100
    for own, swapped in zip(pairs[::2], pairs[1::2], strict=True):
        assert own.pair == swapped.pair and own.response == swapped.response
        assert own.human == [5.0] and swapped.human == [1.0]
        assert not content_words(swapped.response) & content_words(swapped.persona)
    assert {f["origin"] for f in loaded.files} == {"local copy"} and not any(
        f["full_file"] for f in loaded.files
    )


def test_characterbench_dialogue_tells_speakers_apart_by_the_untranslated_names() -> None:
    record = {
        "character_name": "风惜云",
        "dialogue": [
            {"speaker": "user", "utterance": "u1"},
            {"speaker": "风惜云", "utterance": "c1"},
            {"speaker": "character", "utterance": "c2"},
        ],
        "translation_en": {
            "greeting": "Hello father.",
            "messages": {"response": "How old were you?"},
            "dialogue": [
                {"speaker": "user", "utterance": "Hi."},
                {"speaker": "Feng Xiyun", "utterance": "Yes."},
                {"speaker": "Feng", "utterance": "Indeed."},
            ],
        },
    }
    assert dialogue(record).splitlines() == [
        "User2: Hello father.",
        "User1: Hi.",
        "User2: Yes.",
        "User2: Indeed.",
        "User1: How old were you?",
    ]


def test_a_file_in_another_format_is_one_line_naming_it(tmp_path: Path) -> None:
    (tmp_path / "characterbench").mkdir()
    bad = tmp_path / "characterbench" / "attribute_consistency_bot_test.json"
    bad.write_text(json.dumps([{"context": "a USR record, not CharacterBench"}]))
    with pytest.raises(PersonagraphError, match="record 1: not in CharacterBench's format") as caught:
        load([BENCHMARKS["characterbench"]], benchmark_dir=tmp_path)
    assert str(bad) in str(caught.value)
    (tmp_path / "persobench").mkdir()
    with (tmp_path / "persobench" / "IT-ConvAI2.csv").open("w", newline="") as out:
        csv.writer(out).writerows([["personas", "reply"], ["i am a nurse", "hi"]])
    with pytest.raises(PersonagraphError, match="no column 'context'"):
        load([BENCHMARKS["persona-swap"]], benchmark_dir=tmp_path)


@needs_dev
def test_a_sample_is_stratified_seeded_and_keeps_pairs_whole() -> None:
    items = load([BENCHMARKS["characterbench"]], benchmark_dir=RAW).items
    bot = [i for i in items if i.group == "characterbench/attribute_bot"]
    taken = stratified_sample(bot, 20, seed=3)
    assert len(taken) == 20 and taken == stratified_sample(bot, 20, seed=3) != stratified_sample(
        bot, 20, seed=4
    )
    share = {level: sum(i.human_mean == level for i in bot) / len(bot) for level in (1.0, 2.0, 3.0, 4.0)}
    for level, part in share.items():  # each score keeps its share, to within one item
        assert abs(sum(i.human_mean == level for i in taken) - 20 * part) <= 1
    pairs = load([BENCHMARKS["persona-swap"]], benchmark_dir=RAW, sample=7).items
    assert len(pairs) == 14 and len({i.pair for i in pairs}) == 7
