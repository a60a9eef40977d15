"""Judge meta-evaluation: how well LLM judges agree with human ratings of the same responses.

Input is an items file, one record per human-rated response (JSONL, or CSV with the same columns)::

    {"id": "r1", "persona": "...", "context": "...", "question": "...", "response": "...",
     "criterion": "expected_action", "human": [4, 5, 3], "scale": [1, 5]}

* ``persona``, ``context``, ``question`` and ``scale`` are optional. In JSONL ``context`` may also be
  a list of dialogue turns (strings or ``{"role"|"speaker", "content"|"text"}`` objects), shown to the
  judge one per line, before the question.
* ``contradiction`` (optional, read by ``judge-check --items``): the response rewritten by hand to
  contradict the persona, the check's contradiction variant in place of the generator model's.
* ``human`` is a number or a list of numbers, one per rater (``null`` entries are dropped). In CSV a
  list is ``4;5;3`` or a quoted JSON list ``"[4, 5, 3]"``.
* ``scale`` is the human scale ``[min, max]`` (integers; ``1;5`` in CSV), by default the rubric's.
  All records of one criterion share one scale. An empty CSV cell means "not given".
* ``criterion`` names a rubric personagraph knows: a PersonaGym task (by name or key), any packaged
  ``personagraph/judges/rubrics/<key>.yaml`` (the folder is listed at run time), or a user rubric file
  passed with ``--rubric`` (by file stem or by its ``task`` name; it wins over a packaged name).

Every judge scores every record through :func:`personagraph.judges.judge.score_response` with a
:class:`~personagraph.store.RunStore` in the run directory: each verdict is a ``meta_verdict`` record
and a re-run asks nothing already answered (a failed verdict is asked again unless ``retry_failed`` is off;
its reply, if any, comes from the response cache).

Scales: a judge's score on the rubric's scale is mapped linearly onto the record's human scale, not
rounded: Spearman/Kendall are unaffected, MAE and bias are in human-scale units, and the
quadratic-weighted κ of :func:`~personagraph.judges.stats.agreement_report` rounds to the nearest
category (ties to even). Several ratings per record are averaged for agreement; their Krippendorff's α
(ordinal) is the humans' own agreement, the ceiling to read a judge against. "overall" pools all
criteria, mapping scores linearly onto the most common human scale when criteria differ (α is then not
pooled).

``meta_eval.json`` (:func:`build_meta_summary`): ``results[<criterion>|"overall"]`` has ``n_records``,
``scale``, ``human`` (``mean``, ``krippendorff_alpha``, ``n_multi_rated``, ``length_correlation``) and
``judges[<spec>|"ensemble"]`` with ``n``, ``failed``, ``mean``, ``bias`` (mean judge − human),
``spearman``, ``kendall``, ``quadratic_kappa``, ``mae`` and ``length_correlation``, each
``{"value", "ci_low", "ci_high"}`` (95% paired bootstrap over records; None where undefined).
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from pydantic import BaseModel, Field, model_validator

from personagraph.environments import task_by_name
from personagraph.errors import PersonagraphError
from personagraph.files import read_jsonl, read_text
from personagraph.judges.features import BASELINES, Text
from personagraph.judges.features import compute as compute_features
from personagraph.judges.judge import score_response
from personagraph.judges.protocols import Protocol
from personagraph.judges.rubrics import Rubric, load_rubric, load_rubric_file
from personagraph.judges.stats import (
    agreement_report,
    krippendorff_alpha,
    length_correlation,
    mean_estimate,
    pair_credit,
    roc_auc,
    spearman_difference,
)
from personagraph.models import ModelClient
from personagraph.models.settings import MAX_CONCURRENCY
from personagraph.records import register_record_type
from personagraph.resources import list_dir, read_yaml
from personagraph.schemas import Seed, short_id

RECORD_KIND = "meta_verdict"
ITEM_KIND = "meta_item"
STORE_KIND = "meta-eval"
SUMMARY_FILE = "meta_eval.json"
OVERALL = "overall"
ENSEMBLE = "ensemble"
REQUIRED = ("id", "response", "criterion", "human")
OPTIONAL = ("persona", "context", "question", "scale", "contradiction")
TEXT_OPTIONAL = tuple(c for c in OPTIONAL if c != "scale")
JUDGE_TEMPERATURE = 0.0
JUDGE_MAX_TOKENS = 256


# --- criteria ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Criterion:
    """A rubric records can be judged against. ``key`` is the canonical name used in results."""

    key: str
    rubric: Rubric
    source: str  # "task", "rubric" or the user's rubric file path

    @property
    def fingerprint(self) -> str:
        """Changes whenever the text the judge reads for this rubric changes."""
        return hashlib.sha256(self.rubric.model_dump_json().encode()).hexdigest()[:12]


def _norm(name: str) -> str:
    return " ".join(name.replace("_", " ").replace("-", " ").split()).lower()


def _point(point: Any) -> str:
    # "- Label: text" in YAML is a one-key mapping, not a string.
    if isinstance(point, dict):
        return " ".join(f"{key}: {value}" for key, value in point.items())
    return str(point).strip()


def with_subpoints(rubric: Rubric, data: Any) -> Rubric:
    """The rubric with its ``subpoints`` (MADial-style 0/1 checks, if the file has them) spelled out in
    the criterion text, since :meth:`Rubric.text` shows only ``criterion``, ``scores`` and ``guidance``."""
    points = data.get("subpoints") if isinstance(data, dict) else None
    if not points:
        return rubric
    listed = " ".join(f"({i}) {_point(point)}" for i, point in enumerate(points, start=1))
    text = f"{rubric.criterion.strip()} Sub-points, one point each when it clearly holds: {listed}"
    return rubric.model_copy(update={"criterion": text})


class CriterionCatalogue:
    """Every criterion name personagraph knows: user rubric files, the five tasks, packaged rubrics.

    The packaged rubric folder is listed at run time, so rubrics added there are known without code
    changes; only scored rubrics (with ``scores`` for a scale) can be meta-evaluated, so a rubric of
    another kind (e.g. MADial's pick-the-best intimacy) is refused by name. A user file is known by its
    stem and by its rubric's ``task`` name and wins over a packaged rubric of the same name.
    """

    def __init__(self, rubric_files: Iterable[str | Path] = ()) -> None:
        self._user: dict[str, Criterion] = {}
        for raw in rubric_files:
            path = Path(raw)
            rubric = load_rubric_file(path)
            rubric = with_subpoints(rubric, yaml.safe_load(path.read_text(encoding="utf-8")))
            criterion = Criterion(key=path.stem, rubric=rubric, source=str(path))
            for name in (path.stem, rubric.task):
                self._user.setdefault(_norm(name), criterion)
        self._packaged = [
            name[: -len(".yaml")] for name in list_dir("judges/rubrics") if name.endswith(".yaml")
        ]
        self._cache: dict[str, Criterion | None] = {}

    @staticmethod
    def _packaged_rubric(key: str) -> Rubric:
        path = f"judges/rubrics/{key}.yaml"
        data = read_yaml(path)
        if not isinstance(data, dict) or "scores" not in data:
            kind = data.get("kind", "unscored") if isinstance(data, dict) else "unscored"
            raise PersonagraphError(
                f"criterion {key!r}: personagraph/{path} is a {kind} rubric without scores; "
                "meta-eval needs a scored rubric"
            )
        return with_subpoints(load_rubric(key), data)

    def resolve(self, name: str) -> Criterion | None:
        """The criterion called ``name`` (case, spaces, ``_`` and ``-`` do not matter), or None.

        Raises:
            PersonagraphError: when ``name`` is a packaged rubric that has no scores.
        """
        wanted = _norm(name)
        if not wanted:
            return None
        if wanted in self._cache:
            return self._cache[wanted]
        found: Criterion | None = self._user.get(wanted)
        if found is None and (task := task_by_name(name)) is not None:
            found = Criterion(key=task.key, rubric=self._packaged_rubric(task.rubric), source="task")
        if found is None:
            key = next((k for k in self._packaged if _norm(k) == wanted), None)
            if key is not None:
                found = Criterion(key=key, rubric=self._packaged_rubric(key), source="rubric")
        self._cache[wanted] = found
        return found

    def names(self) -> list[str]:
        """The canonical names of scored rubrics, for error messages."""
        scored = [
            k
            for k in self._packaged
            if isinstance(d := read_yaml(f"judges/rubrics/{k}.yaml"), dict) and "scores" in d
        ]
        return sorted({*scored, *(c.key for c in self._user.values())})

    def unknown(self, name: str) -> str:
        return (
            f"unknown criterion {name!r} (known: {', '.join(self.names())}, the task names, "
            "or a rubric file given with --rubric)"
        )


# --- items ---------------------------------------------------------------------------------------
class MetaItem(BaseModel):
    """One human-rated response. ``human`` holds every rating; agreement uses their mean."""

    id: str
    criterion: str  # canonical criterion key
    response: str
    human: list[float] = Field(min_length=1)
    scale: tuple[int, int]
    persona: str = ""
    context: str = ""
    question: str = ""
    contradiction: str = ""  # the response contradicting the persona, written by hand (judge-check)
    row: int = 0
    group: str = ""  # results are keyed by this where given (a benchmark's subset), else by criterion
    pair: str = ""  # items of one pair (the same reply under two personas) are scored as a pair
    reference: float | None = None  # a published reference judge's score, on the human scale

    @property
    def human_mean(self) -> float:
        return float(np.mean(self.human))

    @property
    def key(self) -> str:
        """Identifies the judged content: the same record edited is judged again."""
        return short_id(self.id, self.criterion, self.persona, self.context, self.question, self.response)

    @property
    def section(self) -> str:
        """The result section the item counts in: its group, else its criterion."""
        return self.group or self.criterion


register_record_type(ITEM_KIND, MetaItem)


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{value!r} is not a number")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{value!r} is not a finite number")
    return number


def _parse_cell_list(text: str) -> Any:
    """A CSV cell (or a string in JSON) holding a number, ``a;b;c`` or a JSON list."""
    text = text.strip()
    if text.startswith("["):
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            raise ValueError(f"{text!r} is not a JSON list") from None
    parts = [p.strip() for p in text.split(";")] if ";" in text else [text]
    values: list[Any] = []
    for part in parts:
        try:
            values.append(float(part))
        except ValueError:
            raise ValueError(f"{part!r} is not a number") from None
    return values if ";" in text else values[0]


def _parse_human(value: Any) -> list[float]:
    if isinstance(value, str):
        value = _parse_cell_list(value)
    values = value if isinstance(value, list) else [value]
    ratings = [_number(v) for v in values if v is not None]
    if not ratings:
        raise ValueError("no rating given")
    return ratings


def _parse_scale(value: Any) -> tuple[int, int]:
    if isinstance(value, str):
        value = _parse_cell_list(value)
    if not isinstance(value, list) or len(value) != 2:
        raise ValueError(f"{value!r} is not [min, max]")
    bounds = [_number(v) for v in value]
    if any(b != int(b) for b in bounds):
        raise ValueError(f"{value!r}: bounds must be integers")
    low, high = int(bounds[0]), int(bounds[1])
    if low >= high:
        raise ValueError(f"{value!r}: min must be below max")
    return low, high


def _turn(turn: Any) -> str:
    if isinstance(turn, str):
        return turn
    if isinstance(turn, dict):
        speaker = next((str(turn[k]) for k in ("role", "speaker", "name") if turn.get(k) is not None), "")
        text = next((str(turn[k]) for k in ("content", "text", "utterance") if turn.get(k) is not None), None)
        if text is not None:
            return f"{speaker}: {text}" if speaker else text
    return json.dumps(turn, ensure_ascii=False)


def _text(value: Any, column: str) -> str:
    if value is None:
        return ""
    if column == "context" and isinstance(value, list):  # a dialogue: one turn per line
        return "\n".join(_turn(turn) for turn in value)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and column == "id":
        return str(value)
    if not isinstance(value, str):
        raise ValueError(f"{column}: expected text, got {type(value).__name__}")
    return value


def _read_rows(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """(row number, raw record) pairs; row numbers are file lines (the CSV header is row 1)."""
    text = read_text(path)
    is_csv = path.suffix.lower() == ".csv" or (
        path.suffix.lower() not in {".jsonl", ".json", ".ndjson"} and not text.lstrip().startswith("{")
    )
    rows: list[tuple[int, dict[str, Any]]] = []
    if is_csv:
        reader = csv.DictReader(text.splitlines(keepends=True))
        header = [h.strip() for h in (reader.fieldnames or [])]
        if not header:
            raise PersonagraphError(f"{path}: row 1: no header row")
        reader.fieldnames = header
        missing = [c for c in REQUIRED if c not in header]
        if missing:
            raise PersonagraphError(f"{path}: row 1 (header): missing column {missing[0]!r}")
        for record in reader:
            if record.get(None):
                raise PersonagraphError(f"{path}: row {reader.line_num}: more cells than header columns")
            if not any((v or "").strip() for v in record.values()):
                continue
            cleaned = {
                k: (None if v is None or v.strip() == "" and k != "response" else v)
                for k, v in record.items()
            }
            rows.append((reader.line_num, cleaned))
        return rows
    return read_jsonl(path, text=text, objects=True)


def load_items(path: str | Path, catalogue: CriterionCatalogue) -> list[MetaItem]:
    """Reads and validates an items file (JSONL or CSV; see the module docstring for the columns).

    Raises:
        PersonagraphError: naming the file and row, for a missing column, a bad value or scale, a
            human rating outside the scale, an unknown criterion, a duplicate (id, criterion), or a
            criterion whose records use different human scales.
    """
    path = Path(path)
    items: list[MetaItem] = []
    seen: set[tuple[str, str]] = set()
    scales: dict[str, tuple[int, int]] = {}
    for row, record in _read_rows(path):
        where = f"{path}: row {row}"
        for column in REQUIRED:
            if column not in record:
                raise PersonagraphError(f"{where}: missing column {column!r}")
            if record[column] is None:
                raise PersonagraphError(f"{where}: {column}: empty")
        try:
            fields = {c: _text(record.get(c), c) for c in ("id", "response", "criterion", *TEXT_OPTIONAL)}
        except ValueError as exc:
            raise PersonagraphError(f"{where}: {exc}") from None
        if not fields["id"].strip():
            raise PersonagraphError(f"{where}: id: empty")
        where = f"{where} (id {fields['id']})"
        try:
            criterion = catalogue.resolve(fields["criterion"])
        except PersonagraphError as exc:
            raise PersonagraphError(f"{where}: {exc}") from None
        if criterion is None:
            raise PersonagraphError(f"{where}: {catalogue.unknown(fields['criterion'])}")
        try:
            human = _parse_human(record["human"])
        except ValueError as exc:
            raise PersonagraphError(f"{where}: human: {exc}") from None
        try:
            scale = criterion.rubric.scale if record.get("scale") is None else _parse_scale(record["scale"])
        except ValueError as exc:
            raise PersonagraphError(f"{where}: scale: {exc}") from None
        outside = [h for h in human if not scale[0] <= h <= scale[1]]
        if outside:
            raise PersonagraphError(
                f"{where}: human rating {outside[0]:g} is outside the scale [{scale[0]}, {scale[1]}]"
            )
        if scales.setdefault(criterion.key, scale) != scale:
            raise PersonagraphError(
                f"{where}: scale [{scale[0]}, {scale[1]}] differs from the scale "
                f"{list(scales[criterion.key])} of earlier {criterion.key} records"
            )
        if fields["contradiction"] and " ".join(fields["contradiction"].split()) == " ".join(
                fields["response"].split()):
            raise PersonagraphError(f"{where}: contradiction: the response itself, not a contradiction of it")
        if (fields["id"], criterion.key) in seen:
            raise PersonagraphError(f"{where}: duplicate id for criterion {criterion.key}")
        seen.add((fields["id"], criterion.key))
        items.append(
            MetaItem(
                id=fields["id"],
                criterion=criterion.key,
                response=fields["response"],
                human=human,
                scale=scale,
                persona=fields["persona"],
                context=fields["context"],
                question=fields["question"],
                contradiction=fields["contradiction"],
                row=row,
            )
        )
    if not items:
        raise PersonagraphError(f"{path}: no records")
    return items


# --- judging -------------------------------------------------------------------------------------
class MetaVerdict(BaseModel):
    """One judge's verdict on one item (record kind ``meta_verdict``); ``score`` on the rubric scale."""

    id: str
    item_key: str
    item_id: str
    criterion: str
    judge: str
    rubric_scale: tuple[int, int]
    status: str
    score: int | None = None
    expected_score: float | None = None  # probability-weighted score, where the judge returned logprobs
    rationale: str = ""
    raw: str = ""
    error: str | None = None


register_record_type(RECORD_KIND, MetaVerdict)


def verdict_id(item: MetaItem, criterion: Criterion, judge: str, protocol: Protocol) -> str:
    return short_id(item.key, judge, criterion.fingerprint, protocol.version)


def question_text(item: MetaItem) -> str:
    """What the judge reads as the question: the context (e.g. the dialogue so far) comes first."""
    if item.context.strip():
        context = f"(context) {item.context.strip()}"
        return f"{context}\n{item.question.strip()}" if item.question.strip() else context
    return item.question


async def judge_item(
    client: ModelClient, item: MetaItem, criterion: Criterion, protocol: Protocol
) -> MetaVerdict:
    scored = await score_response(
        client, criterion.rubric, persona=item.persona, question=question_text(item), response=item.response,
        protocol=protocol,
    )
    return MetaVerdict(
        id=verdict_id(item, criterion, client.name, protocol),
        item_key=item.key,
        item_id=item.id,
        criterion=criterion.key,
        judge=client.name,
        rubric_scale=criterion.rubric.scale,
        **scored.verdict_fields(),
    )


class MetaEvalConfig(BaseModel):
    """Everything that defines a meta-evaluation (recorded in the run directory, without secrets)."""

    items: str | None = None  # a human-rated items file; or
    benchmark: list[str] = Field(default_factory=list)  # built-in benchmarks (judges/benchmarks), or groups
    benchmark_dir: str | None = None  # local copies of the benchmarks' files (else the cache, downloading)
    sample: int | None = Field(None, ge=1, le=100_000)  # per benchmark subset: units stratified by human score, seeded
    judges: list[str] = Field(min_length=1)
    criteria: list[str] | None = None  # restrict to these criterion names
    rubric_files: list[str] = Field(default_factory=list)
    concurrency: int = Field(8, ge=1, le=MAX_CONCURRENCY)
    seed: Seed = 0
    n_resamples: int = Field(1000, ge=100, le=100_000)
    judge_protocol: str | None = None  # judges/protocols.py; None: the default for each judge
    retry_failed: bool = True  # a resumed run asks failed verdicts again (False keeps them failed)

    @model_validator(mode="after")
    def _one_source(self) -> MetaEvalConfig:
        if (self.items is None) == (not self.benchmark):
            raise ValueError("give an items file or benchmarks, one of the two")
        if self.items is not None and (self.benchmark_dir or self.sample):
            raise ValueError("benchmark_dir and sample go with benchmarks, not an items file")
        return self


def write_summary(run_dir: str | Path, summary: dict[str, Any]) -> Path:
    path = Path(run_dir) / SUMMARY_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(summary, indent=2, ensure_ascii=False), encoding="utf-8")
    return path


# --- statistics ----------------------------------------------------------------------------------
def map_scale(score: float, source: tuple[int, int], target: tuple[int, int]) -> float:
    """Maps a score linearly from one scale onto another (``source`` ends land on ``target`` ends)."""
    if tuple(source) == tuple(target):
        return float(score)
    (a, b), (c, d) = source, target
    return c + (float(score) - a) * (d - c) / (b - a)


def _estimate_dict(estimate: BaseModel) -> dict[str, Any]:
    return estimate.model_dump(mode="json")


def _group_stats(
    items: list[MetaItem],
    scores: dict[str, dict[str, float]],  # judge → item key → score on the target scale
    failed: dict[str, int],
    scale: tuple[int, int],
    humans: dict[str, float],  # item key → mean human rating on the target scale
    baselines: dict[str, dict[str, float]],  # baseline → item key → its value
    *,
    alpha: float | None,
    n_multi: int,
    seed: int,
    n_resamples: int,
) -> dict[str, Any]:
    options = {"seed": seed, "n_resamples": n_resamples}
    texts = {i.key: i.response for i in items}
    result: dict[str, Any] = {
        "n_records": len(items),
        "scale": list(scale),
        "human": {
            "mean": float(np.mean(list(humans.values()))) if humans else None,
            "krippendorff_alpha": alpha,
            "n_multi_rated": n_multi,
            "length_correlation": _estimate_dict(
                length_correlation([humans[i.key] for i in items], [i.response for i in items], **options)
            ),
        },
        "judges": {},
        "baselines": {},
    }
    for name, values in baselines.items():
        keys = [i.key for i in items]
        report = agreement_report([values[k] for k in keys], [humans[k] for k in keys], scale, **options)
        result["baselines"][name] = {"n": len(keys), "spearman": _estimate_dict(report.spearman),
                                     "kendall": _estimate_dict(report.kendall)}
    best = max(result["baselines"], key=lambda n: result["baselines"][n]["spearman"]["value"] or -1.0,
               default=None)
    result["best_baseline"] = best
    for judge, by_item in scores.items():
        keys = [i.key for i in items if i.key in by_item]
        judged = [by_item[k] for k in keys]
        human = [humans[k] for k in keys]
        report = agreement_report(judged, human, scale, **options)
        result["judges"][judge] = {
            "n": len(keys),
            "failed": failed.get(judge, 0),
            "mean": float(np.mean(judged)) if judged else None,
            "bias": float(np.mean(np.subtract(judged, human))) if judged else None,
            **report.model_dump(mode="json", exclude={"n", "scale"}),
            "length_correlation": _estimate_dict(
                length_correlation(judged, [texts[k] for k in keys], **options)
            ),
        }
        if best is not None:
            result["judges"][judge]["vs_best_baseline"] = _versus(
                judged, [baselines[best][k] for k in keys], human, best, options
            )
    return result


def _versus(
    judged: list[float], baseline: list[float], human: list[float], name: str, options: dict[str, Any]
) -> dict[str, Any]:
    """The judge's Spearman minus the best baseline's on the same items (paired bootstrap CI);
    ``beats`` only when the whole interval is above 0."""
    difference = spearman_difference(judged, baseline, human, **options)
    beats = difference.ci_low is not None and difference.ci_low > 0
    return {"baseline": name, "spearman_difference": _estimate_dict(difference), "beats": beats}


def baseline_scores(items: Sequence[MetaItem]) -> dict[str, dict[str, float]]:
    """Every baseline of :data:`~personagraph.judges.features.BASELINES` per item key."""
    texts = [Text(persona=i.persona, question=question_text(i), response=i.response) for i in items]
    values = compute_features(BASELINES, texts)
    return {name: {i.key: v for i, v in zip(items, column, strict=True)} for name, column in values.items()}


def _alpha(items: Sequence[MetaItem]) -> tuple[float | None, int]:
    """Krippendorff's α (ordinal) of the raw human ratings, raters by position; and how many items
    have two or more ratings (α does not depend on which rater gave which value)."""
    n_multi = sum(len(i.human) >= 2 for i in items)
    if n_multi == 0:
        return None, 0
    width = max(len(i.human) for i in items)
    matrix = [[i.human[r] if r < len(i.human) else None for i in items] for r in range(width)]
    return krippendorff_alpha(matrix, "ordinal"), n_multi


LOWEST_HIGHEST_MIN = 3  # replies at each end of the scale for the lowest-vs-highest AUC


def _separation(
    group: list[MetaItem],
    scores: dict[str, dict[str, float]],
    baselines: dict[str, dict[str, float]],
    *,
    seed: int,
    n_resamples: int,
) -> dict[str, Any]:
    """What a section reads beyond ρ, for every judge, baseline and the published reference judge (where
    the items carry one): for pairs, pairwise accuracy (ties half, 95% bootstrap CI over pairs) and the
    AUC of true-persona against swapped sides; otherwise the AUC of the replies people scored highest
    against those they scored lowest (a contradiction test where the scale's bottom means "contradicts"),
    when each end has at least :data:`LOWEST_HIGHEST_MIN` replies."""
    scorers = {**scores, **{f"baseline: {n}": v for n, v in baselines.items()}}
    reference = {i.key: i.reference for i in group if i.reference is not None}
    result: dict[str, Any] = {}
    if reference and len(reference) == len({i.key for i in group}):
        humans = [i.human_mean for i in group]
        report = agreement_report([reference[i.key] for i in group], humans, group[0].scale,
                                  seed=seed, n_resamples=n_resamples)
        result["reference"] = {"n": len(group), "spearman": _estimate_dict(report.spearman)}
        scorers["reference"] = reference
    if any(i.pair for i in group):
        pairs: dict[str, list[MetaItem]] = defaultdict(list)
        for item in group:
            pairs[item.pair].append(item)
        complete = [sorted(p, key=lambda i: -i.human_mean) for p in pairs.values() if len(p) == 2]
        rows = {}
        for name, by_key in scorers.items():
            both = [(by_key[high.key], by_key[low.key]) for high, low in complete
                    if high.key in by_key and low.key in by_key]
            high, low = np.array([b[0] for b in both]), np.array([b[1] for b in both])
            rows[name] = {"n_pairs": len(both),
                          "pairwise_accuracy": _estimate_dict(mean_estimate(pair_credit(high, low), seed,
                                                                            n_resamples)),
                          "auc": roc_auc(high, low)}
        result["pairwise"] = rows
        return result
    low_end, high_end = group[0].scale
    lowest = [i.key for i in group if i.human_mean <= low_end]
    highest = [i.key for i in group if i.human_mean >= high_end]
    if min(len(lowest), len(highest)) >= LOWEST_HIGHEST_MIN:
        result["lowest_vs_highest"] = {
            "n_lowest": len(lowest), "n_highest": len(highest),
            "auc": {name: roc_auc([v[k] for k in highest if k in v], [v[k] for k in lowest if k in v])
                    for name, v in scorers.items()},
        }
    return result


EXPECTED_SUFFIX = " (expected)"  # the row of a judge's probability-weighted scores


def build_meta_summary(
    items: list[MetaItem],
    verdicts: list[MetaVerdict],
    judges: list[str],
    *,
    seed: int = 0,
    n_resamples: int = 1000,
) -> dict[str, Any]:
    """Agreement of each judge (and of their ensemble mean) with the humans, per criterion and overall.

    A failed verdict is counted and left out (never a score); the ensemble score of an item is the
    mean of its judges' parsed scores on the human scale. A judge whose parsed verdicts all carry a
    probability-weighted score gets a second row, ``<judge> (expected)``, from those. Every statistic
    comes from :mod:`personagraph.judges.stats`: agreement metrics with paired bootstrap CIs evaluated
    over all resamples at once (equal to scipy / scikit-learn per resample), α from krippendorff.
    """
    by_item: dict[tuple[str, str], MetaVerdict] = {(v.item_key, v.judge): v for v in verdicts}
    baselines = baseline_scores(items)
    groups: dict[str, list[MetaItem]] = defaultdict(list)
    for item in items:
        groups[item.section].append(item)
    common = Counter(i.scale for i in items).most_common(1)[0][0]
    mixed = len({i.scale for i in items}) > 1
    sections: dict[str, Any] = {}
    plan = [(key, group, group[0].scale) for key, group in groups.items()]
    if not any(i.group for i in items):  # benchmark subsets are read apart: pooling them says nothing
        plan.append((OVERALL, items, common))
    for name, group, target in plan:
        if name == OVERALL and len(groups) == 1:
            sections[OVERALL] = sections[group[0].section]  # one criterion: overall is that criterion
            continue
        scores: dict[str, dict[str, float]] = {}
        failed: dict[str, int] = {}
        for judge in judges:
            scores[judge] = {}
            expected: dict[str, float] = {}
            failed[judge] = 0
            for item in group:
                verdict = by_item.get((item.key, judge))
                if verdict is None:
                    continue
                if verdict.status != "ok" or verdict.score is None:
                    failed[judge] += 1
                    continue
                on_human = map_scale(verdict.score, verdict.rubric_scale, item.scale)
                scores[judge][item.key] = map_scale(on_human, item.scale, target)
                if verdict.expected_score is not None:
                    on_human = map_scale(verdict.expected_score, verdict.rubric_scale, item.scale)
                    expected[item.key] = map_scale(on_human, item.scale, target)
            if expected and len(expected) == len(scores[judge]):  # every parsed verdict has one
                scores[judge + EXPECTED_SUFFIX] = expected
                failed[judge + EXPECTED_SUFFIX] = failed[judge]
        if len(judges) > 1:
            ensemble: dict[str, float] = {}
            for item in group:
                found = [scores[j][item.key] for j in judges if item.key in scores[j]]
                if found:
                    ensemble[item.key] = float(np.mean(found))
            scores[ENSEMBLE] = ensemble
            failed[ENSEMBLE] = sum(1 for i in group if i.key not in ensemble)
        humans = {
            i.key: min(max(map_scale(i.human_mean, i.scale, target), target[0]), target[1]) for i in group
        }
        alpha, n_multi = (
            (None, sum(len(i.human) >= 2 for i in group)) if name == OVERALL and mixed else _alpha(group)
        )
        sections[name] = _group_stats(
            group,
            scores,
            failed,
            target,
            humans,
            {name: {i.key: by_key[i.key] for i in group} for name, by_key in baselines.items()},
            alpha=alpha,
            n_multi=n_multi,
            seed=seed,
            n_resamples=n_resamples,
        )
        if name != OVERALL:
            sections[name].update(_separation(group, scores, baselines, seed=seed, n_resamples=n_resamples))
        if name == OVERALL and mixed:
            sections[name]["note"] = (
                f"criteria use different human scales; scores mapped linearly onto "
                f"{list(target)}; α not pooled across scales"
            )
    return {
        "judges": judges,
        "n_records": len(items),
        "criteria": {
            key: {"criterion": group[0].criterion, "n_records": len(group), "scale": list(group[0].scale)}
            for key, group in groups.items()
        },
        "results": sections,
        "failed_verdicts": sum(1 for v in verdicts if v.status != "ok"),
    }
