"""``personagraph memory …``: the Chroma memory bank, recall, and MADial-Bench evaluation."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from personagraph.cli._common import (
    MAX_COUNT,
    RETRY_FAILED_OPTION,
    console,
    progress_bars,
    progress_display,
    run,
)
from personagraph.errors import PersonagraphError
from personagraph.models.settings import MAX_CONCURRENCY
from personagraph.schemas import MAX_SEED
from personagraph.terminal import key_column, neutralise, plain

memory_app = typer.Typer(
    help="Long-term memories: a Chroma bank per user, recall, MADial-Bench evaluation.", no_args_is_help=True,
    rich_markup_mode=None,  # plain help, like the main app's
)

MEMORY_DIR_ENV = "PERSONAGRAPH_MEMORY_DIR"
DEFAULT_MEMORY_DIR = "runs/memory"
MEMORY_DIR_OPTION = typer.Option(
    None, "--memory-dir", help=f"Local bank folder (default ${MEMORY_DIR_ENV} or {DEFAULT_MEMORY_DIR})."
)
CHROMA_URL_OPTION = typer.Option(
    None, "--chroma-url", help="Use a Chroma server instead, e.g. http://localhost:8000."
)
COLLECTION_OPTION = typer.Option("memories", "--collection", help="Chroma collection name.")
EMBEDDING_OPTION = typer.Option(
    None,
    "--embedding-model",
    help="Local sentence-transformers folder (default: the packaged all-MiniLM-L6-v2).",
)


def open_bank(
    memory_dir: Path | None,
    chroma_url: str | None,
    collection: str = "memories",
    model_path: str | None = None,
) -> Any:
    """The bank named by the flags: a Chroma server when ``--chroma-url`` is given, else a local folder."""
    from personagraph.memory.bank import MemoryBank

    location = chroma_url or memory_dir or os.environ.get(MEMORY_DIR_ENV) or DEFAULT_MEMORY_DIR
    return MemoryBank(location, collection=collection, model_path=model_path)


def check_user(user: str | None) -> None:
    """Refuses an empty or blank ``--user`` as the flag's own error (a memory's user id is never blank)."""
    if user is not None and not user.strip():
        raise PersonagraphError(f"--user {user!r}: must not be empty")


def parse_ks(spec: str) -> list[int]:
    """``"1,3,5,10"`` → ``[1, 3, 5, 10]``."""
    try:
        ks = sorted({int(x) for x in spec.split(",") if x.strip()})
    except ValueError:
        raise PersonagraphError(f"--k {spec}: expected comma-separated integers, e.g. 1,3,5,10") from None
    if not ks or ks[0] < 1:
        raise PersonagraphError(f"--k {spec}: every k must be at least 1")
    return ks


def parse_methods(spec: str) -> list[str]:
    """``"dense,bm25"`` (or ``all``) → method names, checked."""
    from personagraph.memory.recall import METHODS

    names = list(METHODS) if spec.strip() == "all" else [m.strip() for m in spec.split(",") if m.strip()]
    bad = [m for m in names if m not in METHODS]
    if bad or not names:
        raise PersonagraphError(f"--method {spec}: choose from {', '.join(METHODS)} or all")
    return names


def _meta(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        if "=" not in pair:
            raise PersonagraphError(f"--meta {pair}: expected key=value")
        key, value = pair.split("=", 1)
        out[key.strip()] = value
    return out


@memory_app.command("add")
def add(
    user: str = typer.Option(..., "--user", help="The user the memory belongs to."),
    event: str = typer.Option(..., "--event", help="What happened, in one or two sentences."),
    time: str = typer.Option("", "--time", help="When (e.g. 2024-05-01)."),
    scene: str = typer.Option("", "--scene", help="Activity, Preferences, Emotional, Others, …"),
    emotion: str = typer.Option("", "--emotion", help="Happy, Anxious, Sad, …"),
    memory_id: str | None = typer.Option(None, "--id", help="Memory id (default: a random one)."),
    meta: list[str] = typer.Option([], "--meta", help="Extra metadata key=value (repeatable)."),
    memory_dir: Path | None = MEMORY_DIR_OPTION,
    chroma_url: str | None = CHROMA_URL_OPTION,
    collection: str = COLLECTION_OPTION,
    embedding_model: str | None = EMBEDDING_OPTION,
) -> None:
    """Add one memory for a user."""

    def body() -> None:
        from personagraph.memory.bank import Memory

        check_user(user)
        memory = Memory(
            id=memory_id or uuid.uuid4().hex[:12],
            user_id=user,
            time=time,
            scene=scene,
            emotion=emotion,
            event=event,
            metadata=_meta(meta),
        )
        open_bank(memory_dir, chroma_url, collection, embedding_model).add([memory])
        console.print(plain(memory.id))

    run(body)


@memory_app.command("import")
def import_(
    file: Path = typer.Argument(..., help='JSONL: our memories, or MADial\'s {"<id>": {...}} lines.'),
    fmt: str = typer.Option("auto", "--format", help="auto, personagraph or madial."),
    user: str | None = typer.Option(None, "--user", help="User of every line (MADial lines carry none)."),
    madial_split: int | None = typer.Option(
        None,
        "--madial-split",
        min=1,
        max=MAX_COUNT,
        help="MADial file of two users: lines 1..N are user 1, the rest user 2 (English set: 76).",
    ),
    replace: bool = typer.Option(False, "--replace", help="Overwrite memories whose id exists."),
    memory_dir: Path | None = MEMORY_DIR_OPTION,
    chroma_url: str | None = CHROMA_URL_OPTION,
    collection: str = COLLECTION_OPTION,
    embedding_model: str | None = EMBEDDING_OPTION,
) -> None:
    """Import memories from a JSONL file."""

    def body() -> None:
        if fmt not in ("auto", "personagraph", "madial"):
            raise PersonagraphError(f"--format {fmt}: choose auto, personagraph or madial")
        from personagraph.memory.bank import read_memories

        check_user(user)
        # read (and check) the whole file before the bank exists: a bad file leaves no empty bank behind
        memories = read_memories(file, fmt=fmt, user_id=user, madial_split=madial_split)
        saved = 0
        with progress_display(label_width=14, transient=True) as progress:
            task = progress.add_task("embed memories", total=len(memories))

            def landed(n: int) -> None:
                nonlocal saved
                saved += n
                progress.update(task, completed=saved)

            try:
                n = open_bank(memory_dir, chroma_url, collection, embedding_model).save(
                    memories, replace=replace, on_saved=landed
                )
            except KeyboardInterrupt:  # says what the bank holds now: the batches written so far
                again = "with --replace to import them all" if saved else "again"
                kept = f"{saved} of {len(memories)} memories of {file} were imported"
                raise KeyboardInterrupt(f"{kept}; run the same command {again}") from None
        console.print(plain(f"imported {n} memories from {file}"))

    run(body)


@memory_app.command("export")
def export(
    file: Path = typer.Argument(..., help="Where to write the JSONL."),
    fmt: str = typer.Option("personagraph", "--format", help="personagraph or madial."),
    user: str | None = typer.Option(None, "--user", help="Only this user's memories."),
    memory_dir: Path | None = MEMORY_DIR_OPTION,
    chroma_url: str | None = CHROMA_URL_OPTION,
    collection: str = COLLECTION_OPTION,
) -> None:
    """Export memories as JSONL."""

    def body() -> None:
        check_user(user)
        if fmt not in ("personagraph", "madial"):
            raise PersonagraphError(f"--format {fmt}: choose personagraph or madial")
        n = open_bank(memory_dir, chroma_url, collection).export_file(file, fmt=fmt, user_id=user)
        console.print(plain(f"exported {n} memories to {file}"))

    run(body)


@memory_app.command("search")
def search(
    text: str = typer.Argument(..., help="What the user just said (or a whole context)."),
    user: str = typer.Option(..., "--user", help="Whose memories to search."),
    k: int = typer.Option(5, "--k", min=1, max=MAX_COUNT, help="How many memories."),
    method: str = typer.Option(
        "fusion", "--method", help="dense, bm25, hybrid, proactive, multiview, fusion."
    ),
    emotion: str | None = typer.Option(
        None, "--emotion", help="The user's emotion, if known (proactive cue)."
    ),
    scene: str | None = typer.Option(None, "--scene", help="The scene, if known (proactive cue)."),
    memory_dir: Path | None = MEMORY_DIR_OPTION,
    chroma_url: str | None = CHROMA_URL_OPTION,
    collection: str = COLLECTION_OPTION,
    embedding_model: str | None = EMBEDDING_OPTION,
) -> None:
    """Recall a user's memories for a text."""

    async def body() -> None:
        from personagraph.memory.context import DialogueContext, Turn
        from personagraph.memory.recall import Recaller, RecallSettings

        check_user(user)
        names = parse_methods(method)
        if len(names) != 1:
            raise PersonagraphError("--method: give one method for search")
        name = names[0]
        bank = open_bank(memory_dir, chroma_url, collection, embedding_model)
        context = DialogueContext(turns=[Turn(speaker="User", text=text)])
        found = await Recaller(bank, RecallSettings(method=name)).recall(
            user, context, k, emotion=emotion, scene=scene
        )
        table = Table(title=plain(f"memories of {user} ({name})"))
        key_column(table, "id", (neutralise(r.memory.id) for r in found))
        for column in ("score", "time", "emotion", "event"):
            table.add_column(column, justify="right" if column == "score" else "left", overflow="fold")
        for r in found:  # memory text is untrusted: plain cells, never markup
            table.add_row(*(plain(cell) for cell in (r.memory.id, f"{r.score:.3f}", r.memory.time,
                                                      r.memory.emotion, r.memory.event)))
        console.print(table if found else plain(f"no memories for user {user}"))

    run(body)


@memory_app.command("delete")
def delete(
    ids: list[str] = typer.Argument(None, help="Memory ids to delete."),
    user: str = typer.Option(..., "--user", help="Whose memories."),
    all_: bool = typer.Option(False, "--all", help="Delete every memory of the user."),
    memory_dir: Path | None = MEMORY_DIR_OPTION,
    chroma_url: str | None = CHROMA_URL_OPTION,
    collection: str = COLLECTION_OPTION,
) -> None:
    """Delete memories of one user."""

    def body() -> None:
        check_user(user)
        if not ids and not all_:
            raise PersonagraphError("give memory ids to delete, or --all")
        bank = open_bank(memory_dir, chroma_url, collection)
        n = bank.delete_user(user) if all_ else bank.delete(user, ids)
        console.print(plain(f"deleted {n} memories of user {user}"))

    run(body)


def retrieval_table(scores: dict[str, Any], ks: list[int]) -> Table:
    """One block per method: rows are metrics, columns @k (×100)."""
    table = Table(title="memory retrieval (×100; nDCG-MADial: ideal from the retrieved list, nDCG: standard)")
    table.add_column("method")
    table.add_column("metric")
    for k in ks:
        table.add_column(f"@{k}", justify="right")
    for method, result in scores.items():
        for i, (metric, per_k) in enumerate(result.values.items()):
            table.add_row(method if i == 0 else "", metric, *(f"{per_k[k]:.2f}" for k in ks))
        table.add_section()
    return table


@memory_app.command("eval-retrieval")
def eval_retrieval(
    dialogues: Path = typer.Option(..., "--dialogues", help="MADial dialogue file (JSONL)."),
    memories: Path = typer.Option(..., "--memories", help="MADial memory file (JSONL) or ours."),
    method: str = typer.Option(
        "fusion",
        "--method",
        help="Comma-separated: dense, bm25, hybrid, proactive, multiview, fusion, or all.",
    ),
    ks: str = typer.Option("1,3,5,10", "--k", help="Cut-offs, comma-separated."),
    save_rankings: Path | None = typer.Option(
        None,
        "--save-rankings",
        help="Write one JSON line per query "
        "(query_index, user_id, relevant_ids, ranked_ids top 10); with "
        "several methods, one file per method (FILE.<method>.jsonl).",
    ),
    madial_split: int | None = typer.Option(
        None,
        "--madial-split",
        min=1,
        max=MAX_COUNT,
        help="Lines 1..N of a MADial memory file are user 1's (default 76, the English set).",
    ),
    memory_dir: Path | None = typer.Option(
        None, "--memory-dir", help="Keep the bank here (default: temporary)."
    ),
    embedding_model: str | None = EMBEDDING_OPTION,
) -> None:
    """Score memory recall on MADial-Bench files (the paper's protocol: one query per dialogue)."""

    def body() -> None:
        from personagraph.memory.bank import read_memories
        from personagraph.memory.evaluation import evaluate_retrieval, write_rankings
        from personagraph.memory.madial import facts, load_dialogues

        methods, cutoffs = parse_methods(method), parse_ks(ks)
        dialogue_rows = load_dialogues(dialogues)
        split = facts()["memory_split"] if madial_split is None else madial_split
        memory_rows = read_memories(memories, fmt="auto", madial_split=split)
        if embedding_model:
            os.environ["PERSONAGRAPH_EMBEDDING_MODEL"] = embedding_model
        with progress_display(label_width=14, transient=True) as progress:
            result = evaluate_retrieval(
                dialogue_rows, memory_rows, methods, ks=cutoffs, memory_dir=memory_dir, source=str(dialogues),
                on_progress=progress_bars(progress),
            )
        console.print(retrieval_table(result.scores, cutoffs))
        if save_rankings:
            for name in methods:
                target = save_rankings if len(methods) == 1 else save_rankings.with_suffix(f".{name}.jsonl")
                write_rankings(target, result.rankings[name])
                console.print(f"rankings: {target}")

    run(body)


@memory_app.command("eval-dialogue")
def eval_dialogue(
    setting: int = typer.Option(
        ..., "--setting", min=1, max=3, help="1: gold memory; 2: gold + 4 negatives; 3: top-5 retrieved."
    ),
    model: str = typer.Option(..., "--model", help="Responder model spec (test:…, local:…, openai:…)."),
    judge: str = typer.Option(..., "--judge", help="Judge model spec."),
    dialogues: Path = typer.Option(..., "--dialogues", help="MADial dialogue file."),
    memories: Path = typer.Option(..., "--memories", help="MADial memory file."),
    run_dir: Path = typer.Option(
        Path("runs/madial-dialogue"), "--run-dir", help="Run directory (resumable)."
    ),
    seed: int = typer.Option(1991, "--seed", min=0, max=MAX_SEED, help="Seed of setting 2's shuffle."),
    limit: int | None = typer.Option(None, "--limit", min=1, max=MAX_COUNT, help="Only the first N dialogues."),
    method: str = typer.Option("fusion", "--method", help="Retriever for settings 2 (negatives) and 3."),
    negatives: int = typer.Option(4, "--negatives", min=1, max=1000, help="Retrieved negatives beside the gold memory "
                                  "in setting 2."),
    concurrency: int = typer.Option(4, "--concurrency", min=1, max=MAX_CONCURRENCY,
                                    help="Dialogues in flight."),
    retry_failed: bool = RETRY_FAILED_OPTION,
) -> None:
    """Memory recognition + response on MADial-Bench, judged with MADial's criteria."""

    async def body() -> Any:
        # the memory stack (Chroma, the encoder) is heavy: imported when a memory command runs
        from personagraph.memory.dialogue_eval import DialogueEvalConfig, render_summary
        from personagraph.runs.memory_dialogue import run as run_dialogue_eval

        names = parse_methods(method)
        if len(names) != 1:
            raise PersonagraphError("--method: give one retriever")
        name = names[0]
        config = DialogueEvalConfig(
            setting=setting, model=model, judge=judge, seed=seed, limit=limit, method=name,
            negatives=negatives, concurrency=concurrency, retry_failed=retry_failed,
        )
        with progress_display(label_width=14, transient=True) as progress:
            summary = await run_dialogue_eval(
                config, dialogues, memories, run_dir, on_progress=progress_bars(progress)
            )
        console.print(render_summary(summary.model_dump()))
        return summary  # its failed items set the exit code

    run(body)


def register(app: typer.Typer) -> None:
    """Adds ``personagraph memory …``."""
    app.add_typer(memory_app, name="memory")
