"""A scripted OpenAI-compatible chat server for tests: no network, no model.

`OpenAIStub` listens on 127.0.0.1 (a free port) in a background thread and answers
`POST /v1/chat/completions` with the next scripted `(status, body)` from its queue,
recording every request it receives so tests can check what the client sent.
`GET /v1/models` (the client's server check, llm.check_server) answers a list with
`models_status` (200 unless a test sets another) and is recorded in `listings`, apart
from the chat requests. A `responder` function, when set, answers each chat request instead of the queue.
Use it through the real `openai` / `langchain-openai` clients by pointing
OPENAI_BASE_URL at `stub.base_url`.
"""

from __future__ import annotations

import http.server
import json
import socket
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

# Paths the stub answers; every other path gets 404, like a server without that API.
CHAT_PATH = "/v1/chat/completions"
MODELS_PATH = "/v1/models"
# Status and message sent when a test made more requests than it scripted.
EXHAUSTED_STATUS = 599


def chat_completion(content: Any, model: str = "stub-model") -> dict[str, Any]:
    """Body of a successful chat completion whose single message has `content`."""
    return {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def error_body(message: str, code: str = "error") -> dict[str, Any]:
    """Body of an OpenAI-style error response."""
    return {"error": {"message": message, "type": code, "code": code}}


def closed_port() -> int:
    """A local port with nothing listening on it (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class RecordedRequest:
    """One request the stub received."""

    method: str
    path: str
    headers: dict[str, str]  # names in lower case
    body: Any  # parsed JSON, or the raw text when it was not JSON

    def prompt(self) -> str:
        """Content of the last message of a chat-completions request."""
        return self.body["messages"][-1]["content"]


@dataclass
class OpenAIStub:
    """Scripted chat-completions server; use as a context manager."""

    replies: deque = field(default_factory=deque)
    requests: list[RecordedRequest] = field(default_factory=list)
    listings: list[RecordedRequest] = field(default_factory=list)  # GET requests (server checks)
    models_status: int = 200
    # When set, answers every chat request in place of the queue: (status, body, headers) for the request.
    responder: Callable[[RecordedRequest], tuple[int, Any, dict[str, str]]] | None = None

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._server: http.server.ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- scripting -------------------------------------------------------------------
    def add(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        """Queue one reply: `body` is JSON-encoded unless it is str or bytes."""
        self.replies.append((status, body, headers or {}))

    def add_content(self, content: Any) -> None:
        """Queue one successful completion whose message content is `content`."""
        self.add(200, chat_completion(content))

    @property
    def base_url(self) -> str:
        """The URL to put in OPENAI_BASE_URL."""
        assert self._server is not None, "start the stub first"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    # -- lifecycle -------------------------------------------------------------------
    def __enter__(self) -> "OpenAIStub":
        stub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def do_GET(self) -> None:  # noqa: N802 (http.server naming)
                with stub._lock:
                    stub.listings.append(
                        RecordedRequest("GET", self.path, {k.lower(): v for k, v in self.headers.items()}, None)
                    )
                    if self.path != MODELS_PATH:
                        reply = (404, error_body(f"stub: no route {self.path}"))
                    elif stub.models_status != 200:
                        reply = (stub.models_status, error_body(f"stub: status {stub.models_status}"))
                    else:
                        reply = (200, {"object": "list", "data": [{"id": "stub-model", "object": "model"}]})
                self._send(*reply, {})

            def do_POST(self) -> None:  # noqa: N802 (http.server naming)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length).decode("utf-8")
                try:
                    body: Any = json.loads(raw)
                except ValueError:
                    body = raw
                with stub._lock:
                    stub.requests.append(
                        RecordedRequest(
                            "POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body
                        )
                    )
                    if self.path != CHAT_PATH:
                        reply = (404, error_body(f"stub: no route {self.path}"), {})
                    elif stub.responder is not None:
                        reply = stub.responder(stub.requests[-1])
                    elif stub.replies:
                        reply = stub.replies.popleft()
                    else:
                        reply = (EXHAUSTED_STATUS, error_body("stub: no scripted reply left"), {})
                self._send(*reply)

            def _send(self, status: int, body: Any, headers: dict[str, str]) -> None:
                if isinstance(body, bytes):
                    data = body
                elif isinstance(body, str):
                    data = body.encode("utf-8")
                else:
                    data = json.dumps(body).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        # A short poll interval makes shutdown, and so each test's teardown, quick.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        assert self._server is not None and self._thread is not None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


class StalledServer:
    """A model server that stalls: listening on 127.0.0.1 (a free port, a thread), it answers `GET /v1/models` (so
    the client's server check passes) and accepts every chat request but never answers it, as a local server stuck
    in a generation does, until the test ends. `stalled` is set once a chat request came in; `chats` counts them."""

    def __init__(self) -> None:
        self.stalled = threading.Event()
        self.chats = 0
        self._release = threading.Event()
        self._server: http.server.ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        assert self._server is not None, "start the server first"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> "StalledServer":
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                data = json.dumps({"object": "list", "data": [{"id": "stub-model", "object": "model"}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                server.chats += 1
                server.stalled.set()
                server._release.wait()  # no reply: the client waits until its timeout
                self.close_connection = True

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        assert self._server is not None
        self._release.set()
        self._server.shutdown()
        self._server.server_close()
