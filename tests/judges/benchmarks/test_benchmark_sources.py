"""Benchmark files: downloaded once into the cache through a temporary file and verified by sha256, or read
from --benchmark-dir; every way a download fails is one line, with nothing half-written in the cache. The
network is a loopback HTTP server standing in for the upstream host."""

from __future__ import annotations

import hashlib
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from personagraph.cli import app
from personagraph.errors import PersonagraphError
from personagraph.judges.benchmarks.sources import MIRROR_ENV, SourceFile, benchmarks_cache, locate
from personagraph.judges.benchmarks.usr import DATA as USR

BODY = (
    b'[{"context": "hi\\nwhat do you do ?", "fact": "your persona: i am a nurse.\\n", '
    b'"responses": [{"response": "i am a nurse", "Uses Knowledge": [1, 1, 0], "Overall": [4, 5, 4]}]}]'
)
FILE = SourceFile(
    "usr", "owner/repo", "c0ffee", "data/pc_usr_data.json", hashlib.sha256(BODY).hexdigest(), len(BODY)
)


class Upstream(http.server.BaseHTTPRequestHandler):
    """Serves BODY at any path, in the way ``mode`` says: whole, cut short, altered, or not at all."""

    mode = "ok"
    requests = 0

    def do_GET(self) -> None:  # noqa: N802 (the handler's protocol)
        type(self).requests += 1
        if self.mode == "missing":
            self.send_error(404)
            return
        body = BODY.replace(b"nurse", b"pilot") if self.mode == "altered" else BODY
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body[: len(body) // 2] if self.mode == "truncated" else body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def upstream(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[type[Upstream]]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv(MIRROR_ENV, f"http://127.0.0.1:{server.server_address[1]}")
    monkeypatch.setenv("PERSONAGRAPH_CACHE_DIR", str(tmp_path / "cache"))
    Upstream.mode, Upstream.requests = "ok", 0
    yield Upstream
    server.shutdown()
    server.server_close()


def cache_files() -> list[str]:
    folder = benchmarks_cache()
    return sorted(p.name for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


def test_a_download_is_verified_cached_and_then_read_offline(
    upstream: type[Upstream], monkeypatch: pytest.MonkeyPatch
) -> None:
    first = locate(FILE, None)
    assert first.path.read_bytes() == BODY and first.pinned and first.origin == "download"
    assert cache_files() == ["pc_usr_data.json"] and upstream.requests == 1
    monkeypatch.setenv(MIRROR_ENV, "http://127.0.0.1:1")  # no network now: the cached file is enough
    assert locate(FILE, None).path == first.path and upstream.requests == 1


@pytest.mark.parametrize(
    ("mode", "says"),
    [
        ("altered", "does not match the pinned"),
        ("truncated", "cut short"),
        ("missing", "cannot download"),
    ],
)
def test_a_bad_download_is_one_line_and_nothing_is_cached(
    upstream: type[Upstream], mode: str, says: str
) -> None:
    upstream.mode = mode
    with pytest.raises(PersonagraphError, match=says) as caught:
        locate(FILE, None)
    assert "\n" not in str(caught.value) and FILE.url in str(caught.value)
    assert cache_files() == []  # no partial file, no temporary left behind


def test_a_cached_file_that_no_longer_matches_is_downloaded_again(upstream: type[Upstream]) -> None:
    path = locate(FILE, None).path
    path.write_bytes(BODY[:-1] + b" ")
    assert locate(FILE, None).path.read_bytes() == BODY and upstream.requests == 2


def test_no_network_names_the_url_and_the_local_way(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(MIRROR_ENV, "http://127.0.0.1:1")
    monkeypatch.setenv("PERSONAGRAPH_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(PersonagraphError) as caught:
        locate(FILE, None)
    message = str(caught.value)
    assert "cannot download http://127.0.0.1:1/owner/repo/c0ffee/data/pc_usr_data.json" in message
    assert "--benchmark-dir DIR with it at DIR/usr/pc_usr_data.json" in message
    assert cache_files() == []


def test_a_local_copy_is_read_and_its_sha256_recorded_not_required(tmp_path: Path) -> None:
    (tmp_path / "usr").mkdir()
    (tmp_path / "usr" / "pc_usr_data.json").write_bytes(BODY)
    found = locate(USR, tmp_path)
    assert (
        found.origin == "local copy" and found.sha256 == hashlib.sha256(BODY).hexdigest() and not found.pinned
    )


def test_cli_errors_are_one_line_exit_2(
    upstream: type[Upstream], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = CliRunner()
    wrong = tmp_path / "wrong"
    (wrong / "usr").mkdir(parents=True)
    (wrong / "usr" / "other.json").write_text("[]")
    cases = [
        (["--benchmark", "usr-personachat", "--benchmark-dir", str(wrong)], "no usr/pc_usr_data.json"),
        (["--benchmark", "nope"], "unknown benchmark 'nope'"),
        (["--items", str(tmp_path / "x.jsonl"), "--benchmark", "persona"], "not both"),
        (["--sample", "5", "--items", str(tmp_path / "x.jsonl")], "go with --benchmark"),
    ]
    for args, says in cases:
        result = runner.invoke(app, ["meta-eval", *args, "-j", "test:j", "--run-dir", str(tmp_path / "r")])
        assert result.exit_code == 2 and says in result.output, result.output
        assert result.output.count("\n") == 1, result.output
    monkeypatch.setenv(MIRROR_ENV, "http://127.0.0.1:1")
    result = runner.invoke(
        app, ["meta-eval", "--benchmark", "usr-personachat", "-j", "test:j", "--run-dir", str(tmp_path / "r")]
    )
    assert result.exit_code == 2 and "cannot download" in result.output and "--benchmark-dir" in result.output
    assert cache_files() == []
