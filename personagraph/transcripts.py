"""Session transcripts: ``<run_dir>/transcripts/<session>.jsonl`` (a ``header`` line, one ``turn`` line per
entry, an ``end`` line once finished) and a readable ``<session>.md``; :func:`read_transcript` reads one back
for ``judge-session``. Model text is untrusted: HTML-escaped and quoted in Markdown.
"""

from __future__ import annotations

import html
import json
import os
from pathlib import Path
from typing import Any, get_args

from personagraph.agents.user_sim import LEVELS, TurnStatus
from personagraph.errors import PersonagraphError
from personagraph.files import read_jsonl, read_text, safe_id, write_atomic
from personagraph.schemas import MAX_PERSONA_CHARS, short_id, slug
from personagraph.terminal import neutralise

TRANSCRIPT_FORMAT = "personagraph-transcript/1"
MAX_TURNS = 200  # the longest session simulate runs and judge-session judges
_HEADER_TEXTS = ("persona", "user_persona", "scenario", "agent", "user")  # header fields that must be text


def _md(text: str) -> str:
    """Model text for Markdown: HTML-escaped, every line quoted."""
    return (
        "\n".join(f"> {line}" if line else ">" for line in html.escape(text, quote=False).splitlines()) or ">"
    )


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=False)


def transcript_markdown(record: dict[str, Any]) -> str:
    """A readable transcript of a session record (terminal escapes and other control characters in it shown as
    visible ``\\x1b``-style text, as on the terminal)."""
    lines = [
        f"# Session {record['id']}",
        "",
        f"- **Persona:** {_esc(record['persona'])}",
        f"- **Agent:** `{record['agent']}` · **User:** `{record['user']}` — {_esc(record['user_persona'])}",
        f"- **Scenario:** {_esc(record['scenario'])}",
        f"- **Adversarial:** {'yes' if record['adversarial'] else 'no'}",
        f"- **Status:** {record['status']} · **stop:** {record['stop_reason'] or '—'}",
    ]
    if record["break"]:
        b = record["break"]
        lines.append(
            f"- **Character break:** turn {b['turn']}"
            + (f", level {b['level']}" if b.get("level") else "")
            + f" ({b['source']}{': ' + _esc(b['marker']) if b.get('marker') else ''})"
        )
    elif record["status"] == "finished":
        lines.append("- **Character break:** none")
    if record["drift_slope"] is not None:
        lines.append(f"- **Drift:** {record['drift_slope']:+.3f} score points per turn")
    current = None
    for entry in record["turns"]:
        if entry["index"] != current:
            current = entry["index"]
            level = f" · level {entry['level']} ({LEVELS[entry['level']]})" if entry.get("level") else ""
            lines += ["", f"## Turn {current}{level}"]
        who = "User" if entry["role"] == "user" else "Agent"
        if entry["status"] != "ok":
            lines += ["", f"**{who}:** _({entry['status']}: {_esc(entry.get('error') or 'no text')})_"]
            continue
        lines += ["", f"**{who}:**", "", _md(entry["text"]) if entry["text"] else "> _(no text)_"]
        if entry.get("stop"):
            lines += ["", "_(the user ended the conversation)_"]
        if entry.get("at_token_limit"):
            lines += ["", "_(cut off at the token limit)_"]
        if entry.get("refusal_marker"):
            lines += ["", f"_persona break: “{_esc(entry['refusal_marker'])}”_"]
        for judge, scores in (entry.get("scores") or {}).items():
            shown = ", ".join(f"{task} {'—' if s is None else s}" for task, s in scores.items())
            lines += ["", f"_Scores by `{judge}`: {shown}_"]
    verdict = record.get("session_verdict")
    if verdict:
        lines += ["", "## Session verdict", ""]
        if verdict.get("consistency") is not None:
            lines.append(f"- Session consistency: {verdict['consistency']:.2f} / 5")
        if verdict.get("mean_score") is not None:
            lines.append(f"- Mean turn score: {verdict['mean_score']:.2f} / 5")
        for task, mean in verdict.get("task_means", {}).items():
            lines.append(f"- {task}: {mean:.2f}")
        if verdict.get("skipped_judges"):
            lines.append(f"- Skipped (own model): {', '.join(verdict['skipped_judges'])}")
        lines.append(f"- Contradictions: {len(verdict.get('contradictions', []))}")
        for c in verdict.get("contradictions", []):
            lines.append(
                f"  - turns {c['earlier_turn']} → {c['later_turn']} (`{c['judge']}`): "
                f"{_esc(c['description'])}"
            )
        for name, result in verdict.get("judges", {}).items():
            if result.get("rationale"):
                lines.append(f"- `{name}`: {_esc(result['rationale'])}")
    return neutralise("\n".join(lines)) + "\n"  # model text holds no raw escape: `cat` of it is safe


def write_transcript(folder: Path, record: dict[str, Any]) -> tuple[Path, Path]:
    """Writes ``<id>.jsonl`` and ``<id>.md`` for a session record (atomically replaced, never through a link:
    a ``transcripts`` folder that is a symbolic link is refused, a link at a transcript's name is replaced)."""
    if folder.is_symlink():
        raise PersonagraphError(
            f"{folder}: is a symbolic link (to {os.readlink(folder)}); personagraph never writes through a link "
            "in a run directory — replace it with a folder or use another --run-dir"
        )
    if folder.exists() and not folder.is_dir():
        raise PersonagraphError(f"{folder}: exists and is not a directory (it holds the transcripts); move it")
    folder.mkdir(parents=True, exist_ok=True)
    header = {
        "type": "header",
        "format": TRANSCRIPT_FORMAT,
        **{
            k: record[k]
            for k in (
                "id",
                "persona",
                "user_persona",
                "scenario",
                "adversarial",
                "max_turns",
                "agent",
                "user",
                "judges",
                "status",
            )
        },
    }
    lines = [json.dumps(header, ensure_ascii=False)]
    lines += [json.dumps({"type": "turn", **entry}, ensure_ascii=False) for entry in record["turns"]]
    if record["status"] == "finished":
        end = {
            "type": "end",
            **{k: record[k] for k in ("stop_reason", "break", "drift_slope", "session_verdict")},
        }
        lines.append(json.dumps(end, ensure_ascii=False))
    jsonl, md = folder / f"{record['id']}.jsonl", folder / f"{record['id']}.md"
    for path, text in ((jsonl, "\n".join(lines) + "\n"), (md, transcript_markdown(record))):
        try:
            write_atomic(path, text)
        except OSError as exc:
            raise PersonagraphError(f"{path}: cannot write ({exc.strerror or exc})") from None
    return jsonl, md


def _checked_header(header: dict[str, Any], where: str) -> dict[str, Any]:
    """A transcript header whose id can name files (a safe slug) and whose texts are text of a sane size."""
    if header.get("id") is not None:
        safe_id(header["id"], f"{where}: id")
    for field in _HEADER_TEXTS:
        value = header.get(field)
        if value is not None and not isinstance(value, str):
            raise PersonagraphError(f"{where}: {field}: expected text, got {type(value).__name__}")
    if len(header.get("persona") or "") > MAX_PERSONA_CHARS:
        raise PersonagraphError(f"{where}: persona: longer than {MAX_PERSONA_CHARS} characters")
    return header


def _shown(value: Any) -> str:
    """A value from an input file as an error line shows it: its repr, cut to 40 characters."""
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


def _turn_fields(item: dict[str, Any], where: str) -> dict[str, Any]:
    """A turn line's optional fields, checked: ``status`` (ok, failed, empty), ``level`` (an adversarial
    level or none), ``error`` and ``refusal_marker`` (text or none)."""
    status, level = item.get("status", "ok"), item.get("level")
    if status not in get_args(TurnStatus):
        raise PersonagraphError(f"{where}: status: expected one of {', '.join(get_args(TurnStatus))}, "
                                f"got {_shown(status)}")
    if level is not None and (isinstance(level, bool) or level not in LEVELS):
        raise PersonagraphError(f"{where}: level: expected one of {', '.join(map(str, LEVELS))} or none, "
                                f"got {_shown(level)}")
    for name in ("error", "refusal_marker"):
        if item.get(name) is not None and not isinstance(item[name], str):
            raise PersonagraphError(f"{where}: {name}: expected text, got {type(item[name]).__name__}")
    return {"status": status, "error": item.get("error"), "level": level,
            "refusal_marker": item.get("refusal_marker")}


def read_transcript(path: str | Path) -> dict[str, Any]:
    """Reads a transcript JSONL (``simulate``/``chat`` output, or plain ``{"role", "content"}`` lines)
    into ``{id, persona, agent, user, ..., turns}``.

    Raises:
        PersonagraphError: naming the file and line of the first problem.
    """
    path = Path(path)
    raw = read_text(path)
    header: dict[str, Any] = {}
    turns: list[dict[str, Any]] = []
    index = 0
    for number, item in read_jsonl(path, text=raw, objects=True):
        kind = item.get("type", "turn")
        if kind == "header":
            header = _checked_header(item, f"{path}:{number}")
            continue
        if kind != "turn":
            continue
        role = {"human": "user", "ai": "assistant", "agent": "assistant"}.get(
            item.get("role"), item.get("role")
        )
        text = item.get("text", item.get("content"))
        if role not in ("user", "assistant") or not isinstance(text, str):
            raise PersonagraphError(f"{path}:{number}: a turn needs role user/assistant and a text")
        if "index" in item:
            index = item["index"]
            if not isinstance(index, int) or isinstance(index, bool) or index < 0:
                raise PersonagraphError(f"{path}:{number}: index: expected a whole number, got {_shown(index)}")
        elif role == "user" or index == 0:
            index += 1
        if index > MAX_TURNS:
            raise PersonagraphError(f"{path}:{number}: index: turn {_shown(index)} is past the longest session "
                                    f"judged ({MAX_TURNS} turns)")
        turns.append({"index": index, "role": role, "text": text, **_turn_fields(item, f"{path}:{number}"),
                      "stop": bool(item.get("stop")), "at_token_limit": item.get("at_token_limit") is True})
    if not turns:
        raise PersonagraphError(f"{path}: no turns found")
    return {
        "id": header.get("id") or f"{slug(path.stem, 24)}-{short_id(raw)[:8]}",
        "persona": header.get("persona") or "",
        "user_persona": header.get("user_persona") or "",
        "scenario": header.get("scenario") or "",
        "adversarial": bool(header.get("adversarial")),
        "max_turns": header.get("max_turns"),
        "agent": header.get("agent") or "",
        "user": header.get("user") or "",
        "turns": turns,
    }
