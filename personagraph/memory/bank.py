"""The memory bank: users' memories in Chroma, one collection per user.

A bank lives in a local folder (``chromadb.PersistentClient``) or on a Chroma server
(``chromadb.HttpClient`` when the location is an ``http://host:port`` URL); every other line of code is
the same for both. Embeddings are always computed here (the offline embedding function in
:mod:`personagraph.memory.embeddings`) or supplied by the caller, never by Chroma's default model.

Isolation is structural: each user's memories sit in their own collection (``<bank>-u-<hash of user
id>``, the user id in its metadata), so a search only ever touches that user's HNSW index — and every
result's ``user_id`` is checked again before it is returned. (A shared collection with a ``where``
filter was ~10x slower per query at 10k memories: Chroma resolves metadata filters before the
vector search.) A small ``<bank>`` collection holds the bank's settings.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlparse

import numpy as np
from chromadb.errors import NotFoundError
from pydantic import ValidationError

from personagraph.embeddings import encode
from personagraph.errors import PersonagraphError
from personagraph.files import iter_jsonl
from personagraph.memory.embeddings import LocalSentenceEmbedding
from personagraph.memory.memories import DocumentFormat, Memory
from personagraph.memory.recall import METHODS, Recaller, RecallSettings
from personagraph.memory.retriever import MemoryRetriever
from personagraph.store import RunLock, sqlite_damage

if TYPE_CHECKING:
    from personagraph.models import ModelClient

DEFAULT_COLLECTION = "memories"
ExportFormat = Literal["personagraph", "madial"]
_FIELDS = ("time", "scene", "emotion", "event")
# HNSW defaults: cosine space; ef_search raised from Chroma's 100 so filtered top-k stays exact-like.
DEFAULT_HNSW: dict[str, Any] = {
    "space": "cosine",
    "ef_construction": 200,
    "ef_search": 200,
    "max_neighbors": 32,
}


@dataclass
class Hit:
    """A memory returned by a search: cosine ``score`` (higher is closer) and its stored embedding."""

    memory: Memory
    score: float
    embedding: np.ndarray | None = None


def _metadata(memory: Memory) -> dict[str, Any]:
    return {
        "user_id": memory.user_id,
        "memory_id": memory.id,
        "time": memory.time,
        "scene": memory.scene,
        "emotion": memory.emotion,
        "event": memory.event,
        "extra": json.dumps(memory.metadata, ensure_ascii=False, sort_keys=True),
    }


def _memory(meta: dict[str, Any]) -> Memory:
    extra = meta.get("extra") or "{}"
    return Memory(
        id=meta["memory_id"],
        user_id=meta["user_id"],
        time=meta.get("time", ""),
        scene=meta.get("scene", ""),
        emotion=meta.get("emotion", ""),
        event=meta["event"],
        metadata=json.loads(extra),
    )


BANK_LOCK_FILE = "bank.lock"
BANK_STORE_FILE = "chroma.sqlite3"  # Chroma's own store in a local bank folder; its indexes are subfolders
WRITE_WAIT_S = 600.0
"""How long a write to a local bank waits for another process writing it (an import) before it refuses."""
SAVE_BATCH = 500
"""Memories embedded and written per step of :meth:`MemoryBank.save`: each step is committed on its own, so a
large import's progress shows and an interrupted one keeps (and says) what it wrote."""


def is_url(location: str | Path) -> bool:
    """Whether a bank location names a Chroma server rather than a local folder."""
    return str(location).startswith(("http://", "https://"))


def check_local_bank(folder: Path) -> None:
    """Refuses in one line a local bank whose Chroma store is missing, empty or damaged while its index
    folders are beside it (a damaged one in any case), as the run store does: read as an empty bank, it
    would be written over and its indexes orphaned. Read-only: the bank is left untouched."""
    store, where = folder / BANK_STORE_FILE, f"memory bank at {folder}: {BANK_STORE_FILE}"
    try:
        size: int | None = store.stat().st_size
    except FileNotFoundError:
        size = None
    except OSError as exc:
        raise PersonagraphError(f"{where} cannot be read ({exc.strerror})") from None
    if size:
        if (problem := sqlite_damage(store) or _unreadable_row(store)) is not None:
            raise PersonagraphError(
                f"{where} is corrupted ({problem}); it was left untouched — restore it or use another "
                "--memory-dir"
            )
        return
    try:
        indexes = [entry.name for entry in folder.iterdir() if entry.is_dir()]
    except OSError:
        indexes = []
    if indexes:
        state = "missing" if size is None else "empty (0 bytes)"
        raise PersonagraphError(
            f"{where} is {state}, but {len(indexes)} index folders are beside it; it is not read as an empty "
            "bank — restore it or use another --memory-dir"
        )


def _unreadable_row(store: Path) -> str | None:
    """The first table of a bank's store with a row that cannot be read as text (bytes that are not UTF-8
    where text belongs), None when every row reads. SQLite's integrity check does not decode text, and
    Chroma, which does, writes to the file when it opens it before it fails on such a row."""
    try:
        db = sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=30)
        try:
            tables = [name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
            for table in tables:
                try:
                    for _ in db.execute(f'SELECT * FROM "{table.replace(chr(34), chr(34) * 2)}"'):
                        pass
                except (UnicodeDecodeError, sqlite3.DataError):
                    return f"unreadable row in {table}"
        finally:
            db.close()
    except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
        return " ".join(str(exc).split())[:120]
    return None


def make_client(location: str | Path) -> Any:
    """A Chroma client: ``HttpClient`` for an ``http(s)://host:port`` URL, else ``PersistentClient(path)``."""
    import chromadb  # heavy: only the memory commands open a bank
    from chromadb.config import Settings

    settings = Settings(anonymized_telemetry=False, allow_reset=False)
    text = str(location)
    if text.startswith(("http://", "https://")):
        url = urlparse(text)
        if not url.hostname:
            raise PersonagraphError(f"--chroma-url {text}: expected http://host:port")
        port = url.port or (443 if url.scheme == "https" else 8000)
        try:
            return chromadb.HttpClient(
                host=url.hostname, port=port, ssl=url.scheme == "https", settings=settings
            )
        except Exception as exc:  # noqa: BLE001 - connection problems are the user's to fix
            raise PersonagraphError(f"cannot reach the Chroma server at {text}: {exc}") from None
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise PersonagraphError(f"memory dir {path}: exists and is not a directory")
    path.mkdir(parents=True, exist_ok=True)
    return chromadb.PersistentClient(path=str(path), settings=settings)


class MemoryBank:
    """Users' memories in Chroma, one collection per user; every read is scoped to one user.

    Args:
        location: a folder for a local persistent bank, or ``http://host:port`` of a Chroma server.
        collection: the bank's name (its users' collections are named after it).
        model_path: local embedding model folder (default: the packaged all-MiniLM-L6-v2).
        document_format: what gets embedded, ``"event"`` (the event text, the default) or ``"madial"``
            (``str()`` of the time/scene/emotion/event dict, the MADial paper's memory text). Fixed when the
            bank is created.
        hnsw: HNSW settings for new user collections (see :data:`DEFAULT_HNSW`).
    """

    def __init__(
        self,
        location: str | Path,
        *,
        collection: str = DEFAULT_COLLECTION,
        model_path: str | None = None,
        document_format: DocumentFormat = "event",
        hnsw: dict[str, Any] | None = None,
    ) -> None:
        self.location = str(location)
        self.name = collection
        self.model_path = model_path
        self._folder = None if is_url(location) else Path(location)
        self._hnsw = {**DEFAULT_HNSW, **(hnsw or {})}
        self._embedding = LocalSentenceEmbedding(model_path)
        self._collections: dict[str, Any] = {}
        made = self._make_folder()
        new = self._folder is not None and not (self._folder / BANK_STORE_FILE).exists()
        with self._writing(remove_made=made) if new else nullcontext():  # a new bank: made under the lock
            if self._folder is not None:
                check_local_bank(self._folder)
            with self._reaching():  # a full disk, a folder it cannot write: one line, not chroma's InternalError
                self.client = make_client(location)
                self._settings = self.client.get_or_create_collection(
                    collection,
                    metadata={
                        "personagraph_bank": 1,
                        "document_format": document_format,
                        "embedding_model": model_path or "default",
                    },
                    embedding_function=self._embedding,
                )
        meta = self._settings.metadata or {}
        self.document_format: DocumentFormat = meta.get("document_format", document_format)
        stored_model = meta.get("embedding_model", "default")
        if model_path is not None and stored_model != model_path:
            raise PersonagraphError(
                f"memory bank {collection!r} was built with embedding model {stored_model}, not {model_path}"
            )
        self._batch = max(1, min(5000, int(self.client.get_max_batch_size())))

    def _make_folder(self) -> bool:
        """Creates a local bank's folder; True when this call made it (a server's bank: False)."""
        if self._folder is None:
            return False
        if self._folder.exists() and not self._folder.is_dir():
            raise PersonagraphError(f"memory dir {self._folder}: exists and is not a directory")
        try:
            self._folder.mkdir(parents=True)
        except FileExistsError:
            return False
        except OSError as exc:
            raise PersonagraphError(f"memory dir {self._folder}: cannot create it ({exc.strerror or exc})") from None
        return True

    @contextmanager
    def _writing(self, *, remove_made: bool = False) -> Iterator[None]:
        """Holds a local bank's write lock (``bank.lock``, waiting :data:`WRITE_WAIT_S` for another writer):
        a check and the write it allows are one step, so two imports at once end as two in a row do — the
        second refused. ``remove_made``: a failure removes the bank folder this process just made (under the
        lock, so never one another process made). A server's bank has no lock (Chroma's server orders its
        writes; its ``add`` of an existing id is checked before, not atomically)."""
        if self._folder is None:
            yield
            return
        try:
            lock = RunLock(self._folder, name=BANK_LOCK_FILE, flag="--memory-dir", wait_s=WRITE_WAIT_S)
        except BaseException:  # refused, or no room for the lock file: a folder this process made goes again
            if remove_made:
                with suppress(OSError):  # not empty: another process's by now
                    self._folder.rmdir()
            raise
        try:
            yield
        except BaseException:
            if remove_made:  # the bank it began to make is left half-made: removed again
                shutil.rmtree(self._folder, ignore_errors=True)
            raise
        finally:
            lock.release()

    @contextmanager
    def _reaching(self) -> Iterator[None]:
        """Turns a failure to reach the bank (server down, auth refused, bad reply) into one line naming it.

        A missing user collection is not such a failure (callers ask for it with ``create=False``).
        """
        try:
            yield
        except (PersonagraphError, NotFoundError):
            raise
        except BaseException as exc:  # noqa: BLE001 - chroma raises transport and auth errors of many types
            if not isinstance(exc, Exception) and type(exc).__name__ != "PanicException":
                raise  # Ctrl-C and exits pass; a panic of Chroma's Rust core (a BaseException) is its error
            reason = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
            raise PersonagraphError(f"memory bank {self.name!r} at {self.location}: {reason}") from None

    # --- collections ------------------------------------------------------------------------------
    def collection_name(self, user_id: str) -> str:
        """The Chroma collection holding one user's memories."""
        digest = hashlib.sha256(str(user_id).encode("utf-8")).hexdigest()[:24]
        return f"{self.name}-u-{digest}"

    def _user_collection(self, user_id: str, *, create: bool) -> Any | None:
        user_id = str(user_id)
        if user_id in self._collections:
            return self._collections[user_id]
        name = self.collection_name(user_id)
        try:
            with self._reaching():
                if create:
                    col = self.client.get_or_create_collection(
                        name,
                        configuration={"hnsw": dict(self._hnsw)},
                        metadata={"personagraph_bank": self.name, "user_id": user_id},
                        embedding_function=self._embedding,
                    )
                else:
                    col = self.client.get_collection(name, embedding_function=self._embedding)
        except NotFoundError:  # only this means "no memories yet"; a server that is down is an error
            if create:
                raise
            return None
        if (col.metadata or {}).get("user_id") != user_id:
            raise PersonagraphError(f"memory collection {name} does not belong to user {user_id}")
        self._collections[user_id] = col
        return col

    # --- writing ----------------------------------------------------------------------------------
    def embed(self, memories: Sequence[Memory]) -> np.ndarray:
        """Embeds the memories' documents with the bank's model."""
        return encode([m.document(self.document_format) for m in memories], model_path=self.model_path)

    def _write(self, memories: Sequence[Memory], embeddings: np.ndarray | None, *, mode: str) -> None:
        if not memories:
            return
        if embeddings is None:
            embeddings = self.embed(memories)
        embeddings = np.asarray(embeddings, dtype=np.float32)
        if embeddings.shape[0] != len(memories):
            raise PersonagraphError(f"{len(memories)} memories but {embeddings.shape[0]} embeddings")
        by_user: dict[str, list[int]] = {}
        for i, m in enumerate(memories):
            by_user.setdefault(m.user_id, []).append(i)
        for user_id, rows in by_user.items():
            col = self._user_collection(user_id, create=True)
            for start in range(0, len(rows), self._batch):
                chunk = rows[start : start + self._batch]
                kwargs = {
                    "ids": [memories[i].id for i in chunk],
                    "embeddings": embeddings[chunk],
                    "documents": [memories[i].document(self.document_format) for i in chunk],
                    "metadatas": [_metadata(memories[i]) for i in chunk],
                }
                if mode == "upsert":
                    col.upsert(**kwargs)
                else:
                    col.add(**kwargs)

    def add(self, memories: Sequence[Memory], embeddings: np.ndarray | None = None) -> None:
        """Adds new memories; ``embeddings`` (one row per memory) skips the embedding model.

        Raises:
            PersonagraphError: when a memory id already exists for its user, or ids repeat in the batch.
        """
        with self._writing():
            self._refuse_existing(memories)
            self._write(list(memories), embeddings, mode="add")

    def _refuse_existing(self, memories: Sequence[Memory]) -> None:
        """Refuses memories whose id repeats among them or exists for its user already (under the lock)."""
        keys = [(m.user_id, m.id) for m in memories]
        if len(set(keys)) != len(keys):
            raise PersonagraphError("duplicate memory ids in one batch")
        by_user: dict[str, list[str]] = {}
        for user_id, memory_id in keys:
            by_user.setdefault(user_id, []).append(memory_id)
        for user_id, ids in by_user.items():
            existing = self._existing(user_id, ids)
            if existing:
                raise PersonagraphError(
                    f"memory {min(existing, key=_id_key)} of user {user_id} already exists (use update)"
                )

    def upsert(self, memories: Sequence[Memory], embeddings: np.ndarray | None = None) -> None:
        """Adds or replaces memories."""
        with self._writing():
            self._write(list(memories), embeddings, mode="upsert")

    def update(self, memory: Memory) -> None:
        """Replaces an existing memory (re-embedding its text).

        Raises:
            PersonagraphError: when the user has no memory with this id.
        """
        with self._writing():
            if not self._existing(memory.user_id, [memory.id]):
                raise PersonagraphError(f"no memory {memory.id} for user {memory.user_id}")
            self._write([memory], None, mode="upsert")

    def delete(self, user_id: str, ids: Iterable[str]) -> int:
        """Deletes the user's memories with these ids; returns how many existed."""
        with self._writing():
            found = self._existing(str(user_id), [str(i) for i in ids])
            if found:
                self._user_collection(user_id, create=False).delete(ids=sorted(found))
            return len(found)

    def delete_user(self, user_id: str) -> int:
        """Deletes every memory of one user (and the user's collection); returns how many there were."""
        with self._writing():
            col = self._user_collection(user_id, create=False)
            if col is None:
                return 0
            n = int(col.count())
            self.client.delete_collection(col.name)
            self._collections.pop(str(user_id), None)
            return n

    def _existing(self, user_id: str, ids: list[str]) -> set[str]:
        col = self._user_collection(user_id, create=False)
        if col is None or not ids:
            return set()
        found: set[str] = set()
        for start in range(0, len(ids), self._batch):
            found.update(col.get(ids=ids[start : start + self._batch], include=[])["ids"])
        return found

    # --- reading ----------------------------------------------------------------------------------
    def get(self, user_id: str, memory_id: str) -> Memory | None:
        """One memory of one user, or ``None``."""
        col = self._user_collection(user_id, create=False)
        if col is None:
            return None
        got = col.get(ids=[str(memory_id)], include=["metadatas"])
        metas = [m for m in got["metadatas"] or [] if m and m.get("user_id") == str(user_id)]
        return _memory(metas[0]) if metas else None

    def list(self, user_id: str | None = None, *, with_embeddings: bool = False) -> list[Hit]:
        """All memories of one user (or of everyone when ``user_id`` is None), in user, time, id order."""
        users = [str(user_id)] if user_id is not None else self.users()
        include = ["metadatas", "embeddings"] if with_embeddings else ["metadatas"]
        hits: list[Hit] = []
        for uid in users:
            col = self._user_collection(uid, create=False)
            if col is None:
                continue
            offset, page = 0, self._batch
            while True:
                got = col.get(include=include, limit=page, offset=offset)
                metas = got["metadatas"] or []
                embs = got.get("embeddings")
                for i, meta in enumerate(metas):
                    if meta.get("user_id") != uid:
                        continue  # defense in depth: never hand out another user's memory
                    emb = (
                        np.asarray(embs[i], dtype=np.float32)
                        if with_embeddings and embs is not None
                        else None
                    )
                    hits.append(Hit(_memory(meta), 0.0, emb))
                if len(metas) < page:
                    break
                offset += page
        hits.sort(key=lambda h: (_id_key(h.memory.user_id), h.memory.time, _id_key(h.memory.id)))
        return hits

    def memories(self, user_id: str | None = None) -> list[Memory]:
        """The memories themselves (see :meth:`list`)."""
        return [hit.memory for hit in self.list(user_id)]

    def count(self, user_id: str | None = None) -> int:
        """How many memories one user (or the whole bank) holds."""
        users = [str(user_id)] if user_id is not None else self.users()
        total = 0
        for uid in users:
            col = self._user_collection(uid, create=False)
            total += int(col.count()) if col is not None else 0
        return total

    def users(self) -> list[str]:
        """Every user id that has a collection in this bank."""
        found = []
        with self._reaching():
            collections = self.client.list_collections()
        for col in collections:
            meta = getattr(col, "metadata", None) or {}
            if meta.get("personagraph_bank") == self.name and meta.get("user_id") is not None:
                found.append(str(meta["user_id"]))
        return sorted(found, key=_id_key)

    def query(self, user_id: str, query_embeddings: np.ndarray, n: int) -> list[list[Hit]]:
        """Nearest memories of ``user_id`` for each query vector (HNSW search), with their embeddings.

        Returns one list of hits per query row, best first; ``score`` is the cosine similarity.
        """
        queries = np.atleast_2d(np.asarray(query_embeddings, dtype=np.float32))
        col = self._user_collection(user_id, create=False)
        if n <= 0 or queries.shape[0] == 0 or col is None:
            return [[] for _ in range(queries.shape[0])]
        with self._reaching():
            got = col.query(
                query_embeddings=queries, n_results=n, include=["metadatas", "distances", "embeddings"]
            )
        out: list[list[Hit]] = []
        for row in range(queries.shape[0]):
            metas = got["metadatas"][row] if got["metadatas"] else []
            dists = got["distances"][row] if got["distances"] else []
            embs = got["embeddings"][row] if got.get("embeddings") is not None else None
            hits = []
            for i, meta in enumerate(metas):
                if meta.get("user_id") != str(user_id):
                    continue
                emb = np.asarray(embs[i], dtype=np.float32) if embs is not None else None
                hits.append(Hit(_memory(meta), 1.0 - float(dists[i]), emb))
            out.append(hits)
        return out

    def search(self, user_id: str, text: str, n: int = 10) -> list[Hit]:
        """Plain dense search of one user's memories for a text."""
        return self.query(user_id, encode([text], model_path=self.model_path), n)[0]

    def as_retriever(
        self,
        *,
        user: str,
        method: str = "fusion",
        k: int = 4,
        settings: RecallSettings | None = None,
        reranker: ModelClient | None = None,
    ) -> MemoryRetriever:
        """One user's memories as a LangChain retriever, recalled by ``method`` (one of
        :data:`~personagraph.memory.recall.METHODS`; ``settings``: the other recall settings, its method
        replaced) — the top ``k`` per query; ``reranker``: the LLM reranker when ``settings.rerank_top``.

        Raises:
            PersonagraphError: an unknown method, or ``k`` below 1.
        """
        if method not in METHODS:
            raise PersonagraphError(f"method={method!r}: unknown; choose one of {', '.join(METHODS)}")
        if k < 1:
            raise PersonagraphError(f"k={k}: must be at least 1")
        chosen = (settings or RecallSettings()).model_copy(update={"method": method})
        return MemoryRetriever(recaller=Recaller(self, chosen, reranker=reranker), user=str(user), k=k)

    # --- files ------------------------------------------------------------------------------------
    def import_file(
        self,
        path: str | Path,
        *,
        fmt: Literal["auto", "personagraph", "madial"] = "auto",
        user_id: str | None = None,
        madial_split: int | None = None,
        replace: bool = False,
    ) -> int:
        """Imports memories from a JSONL file (see :func:`read_memories`); returns how many."""
        return self.save(read_memories(path, fmt=fmt, user_id=user_id, madial_split=madial_split), replace=replace)

    def save(
        self, memories: Sequence[Memory], *, replace: bool = False, on_saved: Callable[[int], None] | None = None
    ) -> int:
        """Adds memories (``replace``: overwriting those whose id exists); returns how many. Without
        ``replace`` every id is checked first, so a refused save writes nothing. They are embedded and
        written :data:`SAVE_BATCH` at a time, each batch committed; ``on_saved`` gets each batch's count as
        it lands (what an interrupted save wrote)."""
        memories = list(memories)
        with self._writing():
            if not replace:
                self._refuse_existing(memories)
            for start in range(0, len(memories), SAVE_BATCH):
                batch = memories[start : start + SAVE_BATCH]
                self._write(batch, None, mode="upsert" if replace else "add")
                if on_saved is not None:
                    on_saved(len(batch))
        return len(memories)

    def export_file(
        self, path: str | Path, *, fmt: ExportFormat = "personagraph", user_id: str | None = None
    ) -> int:
        """Writes memories as JSONL, ours (one Memory per line) or MADial's (``{"<id>": {...}}``)."""
        memories = self.memories(user_id)
        lines = [json.dumps(_export_row(m, fmt), ensure_ascii=False) for m in memories]
        Path(path).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        return len(memories)


def _id_key(memory_id: str) -> tuple[int, int | str]:
    return (0, int(memory_id)) if memory_id.isdigit() else (1, memory_id)


def _export_row(memory: Memory, fmt: ExportFormat) -> dict[str, Any]:
    if fmt == "madial":
        return {memory.id: memory.madial_dict()}
    return memory.model_dump()


def _is_madial_row(row: Any) -> bool:
    return (
        isinstance(row, dict)
        and len(row) == 1
        and isinstance(next(iter(row.values())), dict)
        and "event" in next(iter(row.values()))
    )


def read_memories(
    path: str | Path,
    *,
    fmt: Literal["auto", "personagraph", "madial"] = "auto",
    user_id: str | None = None,
    madial_split: int | None = None,
) -> list[Memory]:
    """Reads a memory JSONL file: ours (one :class:`Memory` object per line) or MADial's.

    MADial lines (``{"<id>": {"time", "scene", "emotion", "event"}}``) carry no user: give ``user_id``, or
    ``madial_split=N`` to make lines 1..N user ``"1"`` and the rest user ``"2"`` (MADial-Bench English:
    76). For our format ``user_id`` fills in lines without one.

    Raises:
        PersonagraphError: naming file and line for malformed JSON or a bad memory; an empty file.
    """
    path = Path(path)
    memories: list[Memory] = []
    seen: dict[tuple[str, str], int] = {}
    nonblank = 0
    for number, row in iter_jsonl(path):
        nonblank += 1
        madial = _is_madial_row(row) if fmt == "auto" else fmt == "madial"
        try:
            if madial:
                if not (isinstance(row, dict) and len(row) == 1):
                    raise ValueError('expected {"<id>": {"time", "scene", "emotion", "event"}}')
                memory_id, fields = next(iter(row.items()))
                if not isinstance(fields, dict):
                    raise ValueError("memory fields must be an object")
                owner = user_id
                if owner is None and madial_split is not None:
                    owner = "1" if nonblank <= madial_split else "2"
                if owner is None:
                    raise ValueError("MADial memories carry no user: give a user id (or the MADial split)")
                extra = {k: v for k, v in fields.items() if k not in _FIELDS}
                memory = Memory(
                    id=memory_id,
                    user_id=owner,
                    metadata=extra,
                    **{k: str(fields.get(k, "")) for k in _FIELDS},
                )
            else:
                if not isinstance(row, dict):
                    raise ValueError("expected a JSON object")
                if user_id is not None and not row.get("user_id"):
                    row = {**row, "user_id": user_id}
                memory = Memory.model_validate(row)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"]) or "memory"
            raise PersonagraphError(f"{path}:{number}: {where}: {err['msg']}") from None
        except ValueError as exc:
            raise PersonagraphError(f"{path}:{number}: {exc}") from None
        key = (memory.user_id, memory.id)
        if key in seen:
            raise PersonagraphError(
                f"{path}:{number}: memory {memory.id} of user {memory.user_id} repeats line {seen[key]}"
            )
        seen[key] = number
        memories.append(memory)
    if not memories:
        raise PersonagraphError(f"{path}: empty file (no records)")
    return memories
