"""A chat-completions server on 127.0.0.1 that answers from a script or from recorded answers.

It speaks the part of the OpenAI protocol the bot uses (``POST /v1/chat/completions``)
and records every request body it gets. What it answers comes from ``respond``:
a function of the request body returning a ``Reply``. ``scripted`` answers in
turn from a list; ``replay`` answers the recorded answer whose request hash
(``bot.llm.prompt.body_hash``, the model name aside) or file name matches.
Used by the tests (fixture ``llm_server``) and by bench/llm_quality.py.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from bot.llm.prompt import body_hash


@dataclass
class Reply:
    """One answer: a message's text (wrapped in a completion), or a raw status and body."""

    content: str | None = None
    status: int = 200
    body: Any = None  # a whole JSON response instead of ``content``
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds to wait before answering


def completion(content: str, model: str = "test-model") -> dict[str, Any]:
    """A chat-completions response carrying ``content``."""
    return {
        "id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": model,
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


Responder = Callable[[dict[str, Any]], Reply]


class ChatServer:
    """The server; ``respond`` may be swapped between calls."""

    def __init__(self, respond: Responder | None = None) -> None:
        self.respond: Responder = respond or (lambda body: Reply(status=500, body={"error": {"message": "no script"}}))
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._send(404, {"error": {"message": "not found"}}, {})
                    return
                body = json.loads(raw)
                with server.lock:
                    server.requests.append(body)
                    server.headers.append(dict(self.headers))
                reply = server.respond(body)
                if reply.delay:
                    time.sleep(reply.delay)
                payload = reply.body if reply.body is not None else (
                    completion(reply.content, body.get("model", "")) if reply.content is not None else {})
                self._send(reply.status, payload, reply.headers)

            def _send(self, status: int, payload: Any, headers: Mapping[str, str]) -> None:
                data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.01},
                                       daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_port}/v1"

    def start(self) -> ChatServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@contextlib.contextmanager
def running(respond: Responder | None = None) -> Iterator[ChatServer]:
    server = ChatServer(respond).start()
    try:
        yield server
    finally:
        server.stop()


def user_text(body: Mapping[str, Any]) -> str:
    """The user message of a request."""
    return next(m["content"] for m in body["messages"] if m["role"] == "user")


def scripted(replies: list[Reply], then: Responder | None = None) -> Responder:
    """Answer ``replies`` in turn, then ``then`` (or a 500)."""
    queue = list(replies)
    lock = threading.Lock()

    def respond(body: dict[str, Any]) -> Reply:
        with lock:
            if queue:
                return queue.pop(0)
        return then(body) if then else Reply(status=500, body={"error": {"message": "script ended"}})
    return respond


def unmodelled_hash(body: Mapping[str, Any]) -> str:
    """A request's hash with its model name set aside (recorded bodies name ``recorded-eval``)."""
    return body_hash({**body, "model": "recorded-eval"})


def load_answer(path: Path) -> Reply:
    """A recorded answer file: the message content as a JSON string, or a whole response object."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(data, str):
        return Reply(content=data)
    if isinstance(data, dict) and "choices" in data:
        return Reply(body=data)
    return Reply(content=json.dumps(data, ensure_ascii=False))  # a bare answer object


def replay(prompts: Path, answers: Path) -> Responder:
    """Answer each request with the recorded answer to the prompt of the same hash; a request
    no prompt matches gets a 404 (so a changed prompt shows as missing answers, not as wrong ones)."""
    by_hash: dict[str, Path] = {}
    for prompt in sorted(prompts.glob("*.json")):
        answer = answers / prompt.name
        if answer.exists():
            by_hash[unmodelled_hash(json.loads(prompt.read_text(encoding="utf-8")))] = answer

    def respond(body: dict[str, Any]) -> Reply:
        found = by_hash.get(unmodelled_hash(body))
        if found is None:
            return Reply(status=404, body={"error": {"message": "no recorded answer for this request"}})
        return load_answer(found)
    return respond
