"""A local stand-in for the Hugging Face hub's file-download protocol (what ``hf_hub_download`` speaks).

``HEAD``/``GET /{org}/{repo}/resolve/{revision}/{filename}`` answer with the file and the headers the client reads
(``X-Repo-Commit``, ``ETag``, ``Content-Length``); a missing file is a 404 with ``X-Error-Code: EntryNotFound``, an
unknown repository a 404 with ``RepositoryNotFound``, as the hub answers. Serves on 127.0.0.1 only.
"""

from __future__ import annotations

import hashlib
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote

COMMIT = "0123456789abcdef0123456789abcdef01234567"


class HubServer:
    """Serves ``repos``: ``{"sb3/ppo-CartPole-v1": {"config.yml": b"...", ...}}``; records every request path."""

    def __init__(self, repos: dict[str, dict[str, bytes]]) -> None:
        self.repos, self.requests = repos, []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_HEAD(self) -> None:  # noqa: N802 - http.server's naming
                self._answer(send_body=False)

            def do_GET(self) -> None:  # noqa: N802
                self._answer(send_body=True)

            def _answer(self, send_body: bool) -> None:
                server.requests.append(f"{self.command} {self.path}")
                parts = unquote(self.path.split("?")[0]).strip("/").split("/")
                if len(parts) < 5 or parts[2] != "resolve":
                    return self._missing("RepositoryNotFound")
                repo, filename = "/".join(parts[:2]), "/".join(parts[4:])
                if repo not in server.repos:
                    return self._missing("RepositoryNotFound")
                if filename not in server.repos[repo]:
                    return self._missing("EntryNotFound")
                body = server.repos[repo][filename]
                self.send_response(200)
                self.send_header("X-Repo-Commit", COMMIT)
                self.send_header("ETag", f'"{hashlib.sha256(body).hexdigest()}"')
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Content-Type", "application/octet-stream")
                self.end_headers()
                if send_body:
                    self.wfile.write(body)

            def _missing(self, code: str) -> None:
                self.send_response(404)
                self.send_header("X-Error-Code", code)
                self.send_header("X-Error-Message", f"{code}: {self.path}")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> HubServer:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
