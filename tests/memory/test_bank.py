"""The Chroma memory bank: per-user isolation, CRUD, import/export, precomputed embeddings."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from personagraph.errors import PersonagraphError
from personagraph.memory.bank import Memory, MemoryBank, read_memories


def test_other_users_memory_never_comes_back(two_users: MemoryBank) -> None:
    # b's beach memory is the best match for this text, but a's searches must never return it
    hits = two_users.search("a", "Ben went to the beach and surfed the waves", n=10)
    assert hits and all(h.memory.user_id == "a" for h in hits)
    assert {h.memory.id for h in hits} == {"1", "2", "3"}
    assert next(h.memory.id for h in two_users.search("b", "beach", n=10)) == "1"
    assert all(h.memory.user_id == "b" for h in two_users.search("b", "beach", n=10))
    assert two_users.get("a", "9") is None  # b's id is not visible to a
    assert {h.memory.user_id for h in two_users.list("a")} == {"a"}
    assert two_users.search("nobody", "beach") == []


def test_same_id_for_two_users_are_two_memories(two_users: MemoryBank) -> None:
    assert "sandcastle" in two_users.get("a", "1").event
    assert "surfed" in two_users.get("b", "1").event
    assert two_users.delete("a", ["1"]) == 1
    assert two_users.get("a", "1") is None and two_users.get("b", "1") is not None


def test_add_update_delete(bank: MemoryBank) -> None:
    bank.add([Memory(id=1, user_id="u", event="I planted tomatoes", metadata={"source": "test"})])
    with pytest.raises(PersonagraphError, match="already exists"):
        bank.add([Memory(id="1", user_id="u", event="again")])
    bank.update(Memory(id="1", user_id="u", event="I planted roses"))
    assert bank.get("u", "1").event == "I planted roses"
    assert bank.search("u", "flowers in the garden")[0].memory.event == "I planted roses"
    with pytest.raises(PersonagraphError, match="no memory 2"):
        bank.update(Memory(id="2", user_id="u", event="x"))
    assert bank.delete("u", ["1", "404"]) == 1 and bank.count("u") == 0


def test_reopen_keeps_memories(tmp_path: Path) -> None:
    MemoryBank(tmp_path / "c").add([Memory(id="1", user_id="u", event="kept")])
    again = MemoryBank(tmp_path / "c")
    assert again.count() == 1 and again.document_format == "event"


def test_precomputed_embeddings_are_used(bank: MemoryBank) -> None:
    vectors = np.eye(3, 384, dtype=np.float32)
    bank.add([Memory(id=str(i), user_id="u", event=f"e{i}") for i in range(3)], embeddings=vectors)
    hits = bank.query("u", vectors[2:3], 3)[0]
    assert hits[0].memory.id == "2" and hits[0].score == pytest.approx(1.0, abs=1e-5)
    with pytest.raises(PersonagraphError, match="2 embeddings"):
        bank.add([Memory(id="9", user_id="u", event="x")] * 1, embeddings=vectors[:2])


def test_import_export_roundtrip_both_formats(two_users: MemoryBank, tmp_path: Path) -> None:
    ours = tmp_path / "ours.jsonl"
    assert two_users.export_file(ours) == 5
    first = json.loads(ours.read_text().splitlines()[0])
    assert set(first) == {"id", "user_id", "time", "scene", "emotion", "event", "metadata"}
    madial = tmp_path / "madial.jsonl"
    assert two_users.export_file(madial, fmt="madial", user_id="a") == 3
    row = json.loads(madial.read_text().splitlines()[0])
    assert next(iter(row.values())).keys() == {"time", "scene", "emotion", "event"}

    fresh = MemoryBank(tmp_path / "fresh")
    assert fresh.import_file(ours) == 5
    assert fresh.import_file(madial, user_id="c") == 3
    assert fresh.count("c") == 3 and fresh.get("c", "3").event == "Anna loves strawberry ice cream."
    with pytest.raises(PersonagraphError, match="already exists"):
        fresh.import_file(ours)
    assert fresh.import_file(ours, replace=True) == 5


def test_read_memories_errors_name_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text('{"id": "1", "user_id": "u", "event": "ok"}\n\n{"id": "2", "user_id": "u"}\n')
    with pytest.raises(PersonagraphError, match=rf"{path}:3: event"):
        read_memories(path)
    path.write_text('{"1": {"event": "no user"}}\n')
    with pytest.raises(PersonagraphError, match=rf"{path}:1: .*no user"):
        read_memories(path)
    path.write_text('{"id": "1", "user_id": "u", "event": "a"}\n{"id": "1", "user_id": "u", "event": "b"}\n')
    with pytest.raises(PersonagraphError, match=rf"{path}:2: .*repeats line 1"):
        read_memories(path)


def test_memory_dir_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(PersonagraphError, match="not a directory"):
        MemoryBank(tmp_path / "f")


def test_a_server_that_cannot_be_reached_is_one_line_naming_it(bank: MemoryBank, monkeypatch) -> None:
    import httpx

    def down(*args, **kwargs):
        raise httpx.ConnectError("[Errno 111] Connection refused")

    monkeypatch.setattr(bank.client, "get_collection", down)
    with pytest.raises(PersonagraphError) as caught:
        bank.search("a", "beach")  # not "no memories yet"
    assert str(caught.value) == (f"memory bank 'memories' at {bank.location}: "
                                 "ConnectError: [Errno 111] Connection refused")


def test_auth_refused_is_not_an_empty_bank(bank: MemoryBank, monkeypatch) -> None:
    from chromadb.errors import ChromaAuthError

    monkeypatch.setattr(bank.client, "get_collection", lambda *a, **k: (_ for _ in ()).throw(ChromaAuthError("forbidden")))
    with pytest.raises(PersonagraphError, match=r"at .*chroma: ChromaAuthError: forbidden"):
        bank.count("a")


def test_no_chroma_server_at_the_url(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(PersonagraphError) as caught:
        MemoryBank(f"http://127.0.0.1:{port}")
    assert str(caught.value).startswith(f"cannot reach the Chroma server at http://127.0.0.1:{port}")
    assert "\n" not in str(caught.value)


def test_an_empty_memory_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text("\n\n")
    with pytest.raises(PersonagraphError, match=r"m.jsonl: empty file \(no records\)"):
        read_memories(path, user_id="bart")
