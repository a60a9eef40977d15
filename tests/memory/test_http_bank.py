"""The same bank code against a Chroma server (``chroma run`` on loopback) through ``HttpClient``."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from personagraph.errors import PersonagraphError
from personagraph.memory.bank import Memory, MemoryBank


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def chroma_server(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    binary = shutil.which("chroma") or str(Path(sys.executable).parent / "chroma")
    if not Path(binary).exists():
        pytest.skip("the chroma server CLI is not installed")
    port = _free_port()
    server = subprocess.Popen(
        [binary, "run", "--path", str(tmp_path / "srv"), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.2)
        else:
            pytest.skip("chroma server did not start within 60 s")
        yield f"http://127.0.0.1:{port}", server
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.fixture
def chroma_url(chroma_server: tuple[str, subprocess.Popen[bytes]]) -> str:
    return chroma_server[0]


def test_a_stopped_server_is_a_one_line_error(chroma_server: tuple[str, subprocess.Popen[bytes]]) -> None:
    url, server = chroma_server
    bank = MemoryBank(url)
    bank.add([Memory(id="1", user_id="u", event="I went to the beach")])
    server.terminate()
    server.wait(timeout=30)
    with pytest.raises(PersonagraphError) as caught:
        MemoryBank(url).search("u", "beach")  # a fresh bank: no cached collection
    assert str(caught.value).startswith(f"cannot reach the Chroma server at {url}")
    with pytest.raises(PersonagraphError) as caught:
        bank.search("u", "beach")  # the open bank: recall never quietly returns nothing
    assert str(caught.value).startswith(f"memory bank 'memories' at {url}: ")
    assert "\n" not in str(caught.value)


def test_http_bank_same_code_path_and_isolation(chroma_url: str) -> None:
    bank = MemoryBank(chroma_url)
    bank.add(
        [
            Memory(id="1", user_id="a", event="Anna saw a lion at the zoo."),
            Memory(id="1", user_id="b", event="Ben saw a lion and a tiger at the zoo."),
        ]
    )
    hits = bank.search("a", "Ben saw a lion and a tiger", n=5)
    assert [(h.memory.user_id, h.memory.id) for h in hits] == [("a", "1")]
    assert bank.users() == ["a", "b"] and bank.count() == 2
    assert bank.delete_user("b") == 1 and bank.users() == ["a"]
