"""A local LangSmith collector for tests: a tiny HTTP server on 127.0.0.1 that keeps the runs it is sent.

Point ``LANGSMITH_ENDPOINT`` at :attr:`Collector.url`. Its ``/info`` turns off multipart ingestion, so
the LangSmith client posts plain JSON to ``/runs/batch`` (``{"post": [...], "patch": [...]}``); single
``POST /runs`` and ``PATCH /runs/{id}`` are kept too. A run's posts and patches are merged by id.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

INFO = {
    "version": "0.10.0",
    "instance_flags": {},
    "batch_ingest_config": {
        "use_multipart_endpoint": False,
        "size_limit": 100,
        "size_limit_bytes": 20_000_000,
        "scale_up_nthreads_limit": 16,
        "scale_up_qsize_trigger": 1000,
        "scale_down_nempty_trigger": 4,
    },
}


class Collector:
    """Runs by id, as LangSmith would store them (posts and patches merged)."""

    def __init__(self) -> None:
        self.runs: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _reply(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _body(self) -> Any:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                return json.loads(raw) if raw else {}

            def do_GET(self) -> None:  # noqa: N802
                self._reply(200, INFO if self.path.rstrip("/").endswith("/info") else {})

            def do_POST(self) -> None:  # noqa: N802
                path = self.path.split("?")[0].rstrip("/")
                if path.endswith("/runs/multipart"):
                    self.rfile.read(int(self.headers.get("Content-Length") or 0))
                    self._reply(404, {"detail": "not here"})  # the client falls back to /runs/batch
                    return
                body = self._body()
                if path.endswith("/runs/batch"):
                    collector._add(body.get("post") or [], body.get("patch") or [])
                elif path.endswith("/runs"):
                    collector._add([body], [])
                self._reply(200, {})

            def do_PATCH(self) -> None:  # noqa: N802
                body = self._body()
                collector._add([], [{**body, "id": self.path.rstrip("/").rsplit("/", 1)[-1]}])
                self._reply(200, {})

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def _add(self, posts: list[dict[str, Any]], patches: list[dict[str, Any]]) -> None:
        with self._lock:
            for run in [*posts, *patches]:
                merged = self.runs.setdefault(str(run["id"]), {})
                for key, value in run.items():
                    if key == "extra" and isinstance(value, dict):  # metadata arrives in post and patch
                        extra = merged.setdefault("extra", {})
                        extra.setdefault("metadata", {}).update(value.get("metadata") or {})
                    elif value is not None:
                        merged[key] = value

    def of_type(self, run_type: str) -> list[dict[str, Any]]:
        with self._lock:
            return [run for run in self.runs.values() if run.get("run_type") == run_type]

    def __enter__(self) -> Collector:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()
