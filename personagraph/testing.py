"""Persona tests in pytest: ``assert_persona``, ``assert_session`` and the ``personagraph`` fixture.

Installed with personagraph, this plugin is registered by its package (the ``pytest11`` entry point: no
conftest needed)::

    from personagraph.testing import assert_persona

    def test_support_bot_keeps_its_persona():
        assert_persona("support_bot:agent", "A patient support agent for a bike shop", min_score=4)

Each assertion runs :func:`personagraph.evaluate` (or :func:`personagraph.simulate`) in its own run
directory under the pytest rootdir, ``.personagraph/<test>/<key>``, keyed by the test, the agent's
identity (its spec or path, and the source of a function or the settings of a model object) and the
run's config: an unchanged test resumes its finished run and makes 0 LLM calls. A failure names the
failing tasks, quotes the lowest-scored answers with the judges' rationales and points to the HTML
report written beside the run directory.

Options: ``--personagraph-judge SPEC`` (repeatable: the judges of tests that name none),
``--personagraph-model SPEC`` (the agent of tests that pass ``agent=None``), ``--personagraph-user SPEC``
(the simulated user of session tests that name none), ``--personagraph-offline`` (every API model spec, the
tests' own too, replaced by the embedded models; plug-ins and objects stay).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from personagraph.api import aevaluate, asimulate
from personagraph.environments.pool import task_by_name
from personagraph.errors import PersonagraphError
from personagraph.files import write_atomic
from personagraph.judges.rubrics import load_rubric
from personagraph.judges.session import SESSION_RUBRIC
from personagraph.models.spec import DEFAULT_JUDGE, DEFAULT_MODEL, parse_spec
from personagraph.runs.base import run_to_completion
from personagraph.runs.eval import EvalSummary
from personagraph.runs.plugins import is_plugin_path, load_plugins, object_name
from personagraph.runs.simulate import SimulateSummary

CACHE_DIR = ".personagraph"
ASSETS_DIR = "assets"  # in CACHE_DIR: what the failure reports share (the plotting library)
QUOTED_ANSWERS = 3  # lowest-scored answers quoted in a failure message
QUOTED_FAILURES = 3  # failed items of a run quoted in a failure message
QUOTE_CHARS = 300
PERSONA_SCALE = (1.0, 5.0)  # PersonaScore: the mean of the tasks' 1–5 rubric scores


class PersonaAssertionError(AssertionError):
    """A persona test that did not hold: the message says which tasks or sessions, and why."""


# --- where a test's runs go ------------------------------------------------------------------------
@dataclass(frozen=True)
class Options:
    """The plugin's command-line options (see the module docstring)."""

    judges: tuple[str, ...] = ()
    model: str | None = None
    user: str | None = None
    offline: bool = False


@dataclass
class Ledger:
    """What this pytest session's persona assertions cost: one ``(run_dir, llm_calls)`` per assertion."""

    runs: list[tuple[Path, int]] = field(default_factory=list)


LEDGER = pytest.StashKey[Ledger]()
_current: pytest.Item | None = None  # the test being run (set around each test by the hook below)


def _fingerprint(obj: Any) -> str:
    """What an object's cached results depend on: a function's source, else its class's source and its
    repr without memory addresses (a LangChain model's settings)."""
    if inspect.isfunction(obj) or inspect.ismethod(obj):
        try:
            text = inspect.getsource(obj)
        except (OSError, TypeError):
            text = repr(obj)
    else:
        try:
            text = inspect.getsource(type(obj))
        except (OSError, TypeError):
            text = ""
        text += re.sub(r" at 0x[0-9a-fA-F]+", "", repr(obj))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def identity(agent: Any) -> str:
    """The agent's identity in a cache key: a model spec as it is, a ``module:attr`` path with the
    fingerprint of what it loads, an object's name with its fingerprint."""
    if isinstance(agent, str):
        if not is_plugin_path(agent):
            return agent
        loaded = load_plugins([agent])[0]
        return f"{agent}#{_fingerprint(getattr(loaded, 'target', loaded))}"
    return f"{object_name(agent)}#{_fingerprint(agent)}"


def _key_of(value: Any) -> Any:
    """``value`` as JSON for a cache key: objects (agents, judges) by :func:`identity`."""
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if isinstance(value, Mapping):
        return {str(k): _key_of(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, list | tuple):
        return [_key_of(v) for v in value]
    if hasattr(value, "model_dump") and type(value).__module__.startswith("personagraph."):
        return value.model_dump(mode="json")  # a Persona, an Endpoint
    return identity(value)


AGENT_FIELDS = ("models", "judges", "model", "user_agent")  # evaluate/simulate fields naming agents


def _cache_key(fields: dict[str, Any]) -> dict[str, Any]:
    """An assertion's run fields as a cache key: agents and judges by :func:`identity` (so that a changed
    plug-in's code is a new key), the API key left out."""
    key: dict[str, Any] = {}
    for name, value in fields.items():
        if name == "api_key":
            continue
        if name in AGENT_FIELDS:
            key[name] = [identity(v) for v in value] if isinstance(value, list) else identity(value)
        else:
            key[name] = _key_of(value)
    return key


def _slug(text: str, limit: int = 80) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:limit] or "test"


@dataclass
class PersonaTester:
    """The assertions, bound to one test: its node id (part of the cache key), the rootdir under which
    its runs go, the command-line options and the session's ledger."""

    node_id: str
    root: Path
    options: Options = field(default_factory=Options)
    ledger: Ledger = field(default_factory=Ledger)

    @classmethod
    def for_item(cls, item: pytest.Item | None) -> PersonaTester:
        """The tester of a pytest item; outside pytest, one rooted in the working directory."""
        if item is None:
            return cls("outside-pytest", Path.cwd())
        config = item.config
        options = Options(
            judges=tuple(config.getoption("personagraph_judge") or ()),
            model=config.getoption("personagraph_model"),
            user=config.getoption("personagraph_user"),
            offline=bool(config.getoption("personagraph_offline")),
        )
        return cls(item.nodeid, config.rootpath, options, config.stash.setdefault(LEDGER, Ledger()))

    def run_dir(self, kind: str, key: dict[str, Any]) -> Path:
        """``<root>/.personagraph/<test>/<kind>-<hash of key>`` (its ``.gitignore`` keeps it out of git).

        Raises:
            PersonagraphError: the cache folder cannot be made or written (one line), or a part of it that
                personagraph creates is a symbolic link (never written through).
        """
        cache = self.root / CACHE_DIR
        folder = cache / _slug(self.node_id)
        ignore = cache / ".gitignore"
        for path in (cache, ignore, folder):
            if path.is_symlink():
                raise PersonagraphError(f"{path}: is a symbolic link (to {os.readlink(path)}); personagraph never "
                                        f"writes through a link in its cache — remove it or delete {cache}")
        try:
            folder.mkdir(parents=True, exist_ok=True)
            if not ignore.exists():
                write_atomic(ignore, "# personagraph's cached persona-test runs (safe to delete)\n*\n")
        except OSError as exc:
            raise PersonagraphError(f"{cache}: cannot make the persona-test cache there "
                                    f"({exc.strerror or exc}); run pytest where it can write") from None
        blob = json.dumps({"test": self.node_id, **key}, sort_keys=True, ensure_ascii=False)
        digest = hashlib.sha256(blob.encode("utf-8")).hexdigest()[:12]
        return folder / f"{kind}-{digest}"

    def _agent(self, agent: Any) -> Any:
        if agent is None:
            agent = self.options.model
        if agent is None:
            raise PersonagraphError("agent: none given (pass one or run pytest --personagraph-model SPEC)")
        return self._embedded(agent, DEFAULT_MODEL)

    def _embedded(self, value: Any, embedded: str) -> Any:
        """Under ``--personagraph-offline``, an API model spec becomes the embedded model ``embedded``;
        embedded and test specs, plug-in paths and objects (the user's code) stay."""
        if self.options.offline and isinstance(value, str) and not is_plugin_path(value) \
                and parse_spec(value).provider == "openai":
            return embedded
        return value

    def _judges(self, judges: Sequence[Any] | None) -> list[Any] | None:
        chosen = list(judges) if judges is not None else list(self.options.judges)
        out: list[Any] = []
        for judge in (self._embedded(j, DEFAULT_JUDGE) for j in chosen):
            if not any(judge is o or (isinstance(judge, str) and judge == o) for o in out):
                out.append(judge)  # two API judges made embedded are one judge
        return out or None

    def _user(self, options: dict[str, Any]) -> dict[str, Any]:
        """``options`` with ``--personagraph-user`` as the simulated user when they name none."""
        user = self.options.user
        if user is None or "user_model" in options or "user_agent" in options:
            return options
        return {**options, ("user_agent" if is_plugin_path(user) else "user_model"): user}

    def _offline(self, options: dict[str, Any], *roles: str) -> dict[str, Any]:
        """``options`` with the model specs of ``roles`` made embedded under ``--personagraph-offline``."""
        return {**options, **{role: self._embedded(options[role], DEFAULT_JUDGE) for role in roles
                              if role in options}}

    # --- PersonaGym ---------------------------------------------------------------------------------
    def _eval_call(self, agent: Any, persona: Any, judges: Sequence[Any] | None, quick: bool,
                   samples: int | None, options: dict[str, Any]) -> tuple[dict[str, Any], Path]:
        fields: dict[str, Any] = {"models": [self._agent(agent)], "quick": quick,
                                  **self._offline(options, "generator")}
        if (chosen := self._judges(judges)) is not None:
            fields["judges"] = chosen
        if samples is not None:
            fields["samples"] = samples
        run_dir = self.run_dir("eval", _cache_key({"personas": persona, **fields}))
        return {"personas": persona, "run_dir": run_dir, **fields}, run_dir

    async def aassert_persona(
        self,
        agent: Any,
        persona: Any,
        *,
        min_score: float | None = 4.0,
        tasks: Sequence[str] | Mapping[str, float] | None = None,
        judges: Sequence[Any] | None = None,
        samples: int | None = None,
        quick: bool = True,
        **evaluate_options: Any,
    ) -> EvalSummary:
        """Evaluates ``agent`` on ``persona`` (PersonaGym) and fails unless its PersonaScore reaches
        ``min_score`` and each task of ``tasks`` its minimum; returns the run's summary.

        Args:
            agent: a model spec, a ``module:attr`` path or an agent object, as ``evaluate(models=...)``
                takes them (None: ``--personagraph-model``).
            persona: a description or a :class:`~personagraph.Persona` (or several: one PersonaScore).
            min_score: the lowest passing PersonaScore (1–5; None: not checked, but a run with a failed
                or unscored item still fails).
            tasks: task names (each must reach ``min_score``) or a mapping task → its lowest passing score.
            judges: as ``evaluate(judges=...)`` (None: ``--personagraph-judge``, else evaluate's default).
            samples: answers per question (``evaluate(samples=...)``).
            quick: evaluate's quick preset (3 environments, 1 question per task).
            **evaluate_options: any other :func:`personagraph.evaluate` keyword (``questions_per_task``,
                ``generator``, ``seed``, ``base_url``, …).

        Raises:
            PersonaAssertionError: the agent did not hold the persona, a task has no score, or an item of
                the run failed or has no score (an answer the agent never gave is never a pass).
            PersonagraphError: a bad argument (one line naming it, before any call): a threshold that is not
                a number on the rubric's scale (NaN, negative, above it) among them.
        """
        __tracebackhide__ = True
        min_score = _threshold("min_score", min_score, PERSONA_SCALE)
        thresholds = _thresholds(tasks, min_score)
        call, run_dir = self._eval_call(agent, persona, judges, quick, samples, evaluate_options)
        summary = await aevaluate(**call)
        self.ledger.runs.append((run_dir, summary.llm_calls))
        if message := _persona_failure(summary, run_dir, _described(persona), min_score, thresholds):
            raise PersonaAssertionError(message)
        return summary

    def assert_persona(self, agent: Any, persona: Any, **kwargs: Any) -> EvalSummary:
        """The sync twin of :meth:`aassert_persona` (same arguments)."""
        __tracebackhide__ = True
        return _sync(self.aassert_persona(agent, persona, **kwargs))

    # --- sessions -----------------------------------------------------------------------------------
    async def aassert_session(
        self,
        agent: Any,
        persona: Any,
        *,
        turns: int = 4,
        min_consistency: float | None = 4.0,
        max_drift: float | None = None,
        judges: Sequence[Any] | None = None,
        **simulate_options: Any,
    ) -> SimulateSummary:
        """Runs sessions of a simulated user with ``agent`` (``simulate``) and fails unless every session's
        consistency (the session judge's Session Consistency, 1–5) reaches ``min_consistency`` and its
        per-turn scores fall by at most ``max_drift`` points a turn; returns the run's summary. A run with a
        failed or unscored item fails too, naming it.

        ``agent`` and ``judges`` as in :meth:`aassert_persona`; ``**simulate_options`` are any other
        :func:`personagraph.simulate` keyword (``sessions``, ``adversarial``, ``user_model``, …). Thresholds
        outside the rubric's scale (or NaN) are refused in one line before any call.
        """
        __tracebackhide__ = True
        scale = load_rubric(SESSION_RUBRIC).scale
        min_consistency = _threshold("min_consistency", min_consistency, scale)
        max_drift = _threshold("max_drift", max_drift, (0, scale[1] - scale[0]))
        fields: dict[str, Any] = {"model": self._agent(agent), "turns": turns,
                                  **self._offline(self._user(simulate_options), "user_model")}
        if (chosen := self._judges(judges)) is not None:
            fields["judges"] = chosen
        run_dir = self.run_dir("simulate", _cache_key({"persona": persona, **fields}))
        summary = await asimulate(persona, run_dir=run_dir, **fields)
        self.ledger.runs.append((run_dir, summary.llm_calls))
        if message := _session_failure(summary, run_dir, min_consistency, max_drift):
            raise PersonaAssertionError(message)
        return summary

    def assert_session(self, agent: Any, persona: Any, **kwargs: Any) -> SimulateSummary:
        """The sync twin of :meth:`aassert_session` (same arguments)."""
        __tracebackhide__ = True
        return _sync(self.aassert_session(agent, persona, **kwargs))


def _sync(coroutine: Any) -> Any:
    """Runs an assertion's coroutine from sync code; its failure is raised again here, so that pytest
    shows the test's line rather than the event loop's frames."""
    __tracebackhide__ = True
    try:
        return run_to_completion(coroutine)
    except PersonaAssertionError as failed:
        raise PersonaAssertionError(str(failed)) from None


# --- verdicts on a run ------------------------------------------------------------------------------
def _threshold(name: str, value: Any, scale: tuple[float, float]) -> float | None:
    """A threshold argument, checked before any call: None, or a number on ``scale`` (NaN, a bool or a
    number outside the scale would switch the check off or could never pass)."""
    if value is None:
        return None
    low, high = scale
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or not low <= value <= high:
        raise PersonagraphError(f"{name}={value!r}: not a number from {low:g} to {high:g} (the rubric's scale)")
    return float(value)


def _thresholds(tasks: Sequence[str] | Mapping[str, float] | None,
                min_score: float | None) -> dict[str, float]:
    """Task name → lowest passing score, names resolved like the CLI's (``"toxicity"``: Toxicity Control)."""
    if tasks is None:
        return {}
    if isinstance(tasks, str):
        tasks = [tasks]
    wanted = dict(tasks) if isinstance(tasks, Mapping) else dict.fromkeys(tasks, min_score)
    out: dict[str, float] = {}
    for name, minimum in wanted.items():
        task = task_by_name(str(name))
        if task is None:
            raise PersonagraphError(f"tasks: unknown task {name!r}")
        if minimum is None:
            raise PersonagraphError(f"tasks: {name!r} has no minimum (give min_score or a mapping)")
        checked = _threshold(f"tasks[{name!r}]", minimum, load_rubric(task.rubric).scale)
        assert checked is not None
        out[task.name] = checked
    return out


def _quote(text: Any) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= QUOTE_CHARS else text[: QUOTE_CHARS - 1] + "…"


def _report(run_dir: Path) -> Path:
    """Writes the run's HTML report beside its directory (``<run dir>.html``: a run directory's own files
    are never overwritten); its plotting library is one shared copy in ``.personagraph/assets``."""
    from personagraph.report.html import write_report  # plotly: loaded when a test fails, not at start-up

    assets = run_dir.parents[1] / ASSETS_DIR  # run_dir is <root>/.personagraph/<test>/<key>
    return write_report([run_dir], run_dir.with_name(f"{run_dir.name}.html"), assets=assets)


def _answers_text(run_dir: Path, model: str, tasks: set[str]) -> list[str]:
    """The lowest-scored answers of ``model`` (failing tasks first), each with every judge's verdict."""
    from personagraph.report.evaldata import items  # the report package: loaded when a test fails
    from personagraph.report.load import load_run

    rows = [i for i in items(load_run(run_dir)) if i["model"] == model]
    rows.sort(key=lambda i: (i["task"] not in tasks, i["score"] is None, i["score"] or 0.0, i["answer_id"]))
    lines = []
    for item in rows[:QUOTED_ANSWERS]:
        score = "no score" if item["score"] is None else f"{item['score']:.2f}"
        answer = _quote(item["answer"]) if item["status"] == "ok" else f"(failed: {_quote(item['error'])})"
        lines += [f"  [{item['task']}] {score}  Q: {_quote(item['question'])}", f"    A: {answer}"]
        for verdict in item["verdicts"]:
            if verdict.get("status") != "ok":
                lines.append(f"    {verdict.get('judge')}: verdict failed: {_quote(verdict.get('error'))}")
                continue
            capped = (f" (judge said {verdict['judge_score']}; capped: {verdict.get('capped_by')})"
                      if verdict.get("judge_score") is not None else "")
            lines.append(f"    {verdict.get('judge')}: {verdict.get('score')}{capped} — "
                         f"{_quote(verdict.get('rationale'))}")
    return lines


def _run_problems(summary: EvalSummary | SimulateSummary) -> list[str]:
    """Why a run is not complete (none when it is): its failed, incomplete and unscored items counted, the
    first failed ones with their reasons. A failed answer is never a score that can pass."""
    if summary.complete:
        return []
    counts = [f"{n} {what}" for n, what in ((len(summary.failures), "failed"), (summary.incomplete, "incomplete"),
                                            (summary.unscored, "unscored")) if n]
    lines = [f"the run did not complete: {', '.join(counts)} item(s); the same test retries them"]
    lines += [f"  {f.stage} {f.item}" + (f" ({f.model})" if f.model else "") + f": {_quote(f.reason)}"
              for f in summary.failures[:QUOTED_FAILURES]]
    if len(summary.failures) > QUOTED_FAILURES:
        lines.append(f"  … and {len(summary.failures) - QUOTED_FAILURES} more (in {summary.run_dir})")
    return lines


def _described(persona: Any) -> str:
    """The persona(s) as a failure message names them."""
    many = persona if isinstance(persona, list | tuple) else [persona]
    return "; ".join(_quote(getattr(p, "description", p)) for p in many)


def _persona_failure(summary: EvalSummary, run_dir: Path, persona: str, min_score: float | None,
                     thresholds: dict[str, float]) -> str | None:
    """The failure message of an eval run, or None when it passes."""
    (model, result), = summary.models.items() or [("?", {"persona_score": None, "tasks": {}})]
    score = result.get("persona_score")
    means = {task: stats.get("mean") for task, stats in result.get("tasks", {}).items()}
    floor = thresholds or ({task: min_score for task in means} if min_score is not None else {})
    failing = {task: minimum for task, minimum in floor.items()
               if means.get(task) is None or means[task] < minimum}
    score_fails = min_score is not None and (score is None or score < min_score)
    problems = _run_problems(summary)
    if not score_fails and not (thresholds and failing) and not problems:
        return None
    shown = "incomplete" if score is None else f"{score:.2f}"
    head = f"{model} as {persona!r}: PersonaScore {shown}"
    head += f" < {min_score}" if score_fails else f" (min {min_score})" if min_score is not None else ""
    lines = [head]
    if failing:
        lines.append("failing tasks: " + ", ".join(
            f"{task} {'no score' if means.get(task) is None else f'{means[task]:.2f}'} < {minimum}"
            for task, minimum in failing.items()))
    lines += problems
    lines.append("lowest-scored answers:")
    lines += _answers_text(run_dir, model, set(failing))
    lines += [f"judge {line}" for line in summary.judge_validity.values()]
    lines.append(f"report: {_report(run_dir)}")
    return "\n".join(lines)


def _session_failure(summary: SimulateSummary, run_dir: Path, min_consistency: float | None,
                     max_drift: float | None) -> str | None:
    """The failure message of a session run, or None when every session passes."""
    from personagraph.report.load import load_run  # the report package: loaded when a test fails

    records = {r["id"]: r for r in load_run(run_dir).rows("session")}
    lines = []
    for session in summary.sessions:
        consistency, slope = session.get("consistency"), session.get("drift_slope")
        problems = []
        if min_consistency is not None and (consistency is None or consistency < min_consistency):
            problems.append("consistency " + ("none" if consistency is None else f"{consistency:.2f}")
                            + f" < {min_consistency}")
        if max_drift is not None and slope is not None and slope < -max_drift:
            problems.append(f"drift {slope:+.2f} points/turn beyond -{max_drift}")
        if session.get("status") != "finished":
            problems.append(f"session {session.get('status')}")
        if not problems:
            continue
        who = f"{session.get('agent')} as {_quote(session.get('persona'))!r}"
        lines.append(f"session {session['id']} ({who}): {'; '.join(problems)}")
        record = records.get(session["id"], {})
        verdict = record.get("session_verdict") or {}
        for judge, found in (verdict.get("judges") or {}).items():
            reason = found.get("rationale") or found.get("error")
            lines.append(f"  {judge}: {found.get('score')} — {_quote(reason)}")
        for contradiction in verdict.get("contradictions") or []:
            lines.append(f"  contradiction, turns {contradiction['earlier_turn']} and "
                         f"{contradiction['later_turn']}: {_quote(contradiction['description'])}")
        if brk := record.get("break"):
            lines.append(f"  first break: turn {brk.get('turn')} ({brk.get('source')}"
                         + (f": {brk.get('marker')!r})" if brk.get("marker") else ")"))
        means = {t["turn"]: t["score"] for t in verdict.get("turn_means") or []}
        agent_turns = [t for t in record.get("turns", []) if t.get("role") == "assistant"]
        agent_turns.sort(key=lambda t: (means.get(t["index"]) is None, means.get(t["index"], 0.0)))
        for turn in agent_turns[:QUOTED_ANSWERS]:
            mean = means.get(turn["index"])
            lines.append(f"  turn {turn['index']} ({'no score' if mean is None else f'{mean:.2f}'}): "
                         f"{_quote(turn.get('text'))}")
            for judge, by_task in (turn.get("rationales") or {}).items():
                for task, rationale in by_task.items():
                    score = (turn.get("scores") or {}).get(judge, {}).get(task)
                    lines.append(f"    {judge} [{task}] {score}: {_quote(rationale)}")
    lines += _run_problems(summary)
    if not lines:
        return None
    lines += [f"judge {line}" for line in summary.judge_validity.values()]
    lines.append(f"report: {_report(run_dir)}")
    return "\n".join(lines)


# --- module-level assertions: the running test's tester ------------------------------------------------
def tester() -> PersonaTester:
    """The :class:`PersonaTester` of the running test (outside pytest: rooted in the working directory)."""
    return PersonaTester.for_item(_current)


def assert_persona(agent: Any, persona: Any, **kwargs: Any) -> EvalSummary:
    """:meth:`PersonaTester.assert_persona` for the running test."""
    __tracebackhide__ = True
    return tester().assert_persona(agent, persona, **kwargs)


async def aassert_persona(agent: Any, persona: Any, **kwargs: Any) -> EvalSummary:
    """:meth:`PersonaTester.aassert_persona` for the running test (in ``async def`` tests)."""
    __tracebackhide__ = True
    return await tester().aassert_persona(agent, persona, **kwargs)


def assert_session(agent: Any, persona: Any, **kwargs: Any) -> SimulateSummary:
    """:meth:`PersonaTester.assert_session` for the running test."""
    __tracebackhide__ = True
    return tester().assert_session(agent, persona, **kwargs)


async def aassert_session(agent: Any, persona: Any, **kwargs: Any) -> SimulateSummary:
    """:meth:`PersonaTester.aassert_session` for the running test (in ``async def`` tests)."""
    __tracebackhide__ = True
    return await tester().aassert_session(agent, persona, **kwargs)


# --- the plugin's hooks -------------------------------------------------------------------------------
def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("personagraph", "persona tests (personagraph)")
    group.addoption("--personagraph-judge", action="append", default=None, metavar="SPEC",
                    help="judge of persona tests that name none (repeatable; a model spec or module:attr)")
    group.addoption("--personagraph-model", default=None, metavar="SPEC",
                    help="agent under test of persona tests that pass agent=None")
    group.addoption("--personagraph-user", default=None, metavar="SPEC",
                    help="simulated user of session tests that name none")
    group.addoption("--personagraph-offline", action="store_true", default=False,
                    help="replace every API model spec (agent, judges, generator, simulated user) with "
                         "the embedded models")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    global _current
    previous, _current = _current, item  # restored after: pytest may run inside a test (pytester)
    try:
        return (yield)
    finally:
        _current = previous


@pytest.fixture
def personagraph(request: pytest.FixtureRequest) -> PersonaTester:
    """The persona assertions bound to this test: ``personagraph.assert_persona(agent, persona, ...)``."""
    return PersonaTester.for_item(request.node)


WORKER_OUTPUT = "personagraph_runs"  # a pytest-xdist worker's ledger, sent to the controller when it ends


def pytest_configure(config: pytest.Config) -> None:
    if config.pluginmanager.hasplugin("xdist"):  # its hooks exist only with it installed
        config.pluginmanager.register(_XdistController(config), "personagraph-xdist")


def pytest_sessionfinish(session: pytest.Session) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)  # set on a pytest-xdist worker only
    ledger = session.config.stash.get(LEDGER, None)
    if workeroutput is not None and ledger is not None:
        workeroutput[WORKER_OUTPUT] = [[str(path), calls] for path, calls in ledger.runs]


class _XdistController:
    """Under pytest-xdist the tests run in workers: the controller adds each worker's ledger to its own,
    so that its summary line counts every persona run of the session."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        runs = getattr(node, "workeroutput", {}).get(WORKER_OUTPUT, [])
        self.config.stash.setdefault(LEDGER, Ledger()).runs.extend((Path(p), calls) for p, calls in runs)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    ledger = config.stash.get(LEDGER, None)
    if ledger is None or not ledger.runs:
        return
    calls = sum(n for _, n in ledger.runs)
    cached = sum(n == 0 for _, n in ledger.runs)
    terminalreporter.write_line(
        f"personagraph: {len(ledger.runs)} persona run(s), {calls} LLM call(s), {cached} fully cached "
        f"(in {config.rootpath / CACHE_DIR})"
    )
