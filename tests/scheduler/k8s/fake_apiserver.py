"""A Kubernetes API server in a thread, answering the two calls cordoning makes as kube-apiserver does: GET
/api/v1/nodes (a NodeList) and PATCH /api/v1/nodes/<name> with a JSON merge patch (RFC 7386: null deletes a key;
other content types get 415, an unknown node 404), behind a bearer token (401 without it). No real API server can
run on these machines; the shapes follow the Kubernetes API reference (Node v1, Status)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def merge_patch(target, patch):
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def status(code: int, reason: str, message: str) -> dict:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "reason": reason,
            "code": code}  # fmt: skip


class FakeApiServer:
    def __init__(self, names: list[str], token: str = "s3cret") -> None:
        self.token = token
        self.nodes = {n: {"metadata": {"name": n, "annotations": {}}, "spec": {}} for n in names}
        self.patches: list[tuple[str, dict]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _send(self, code: int, doc: dict) -> None:
                body = json.dumps(doc).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _authorised(self) -> bool:
                if self.headers.get("Authorization") != f"Bearer {server.token}":
                    self._send(401, status(401, "Unauthorized", "Unauthorized"))
                    return False
                return True

            def do_GET(self):
                if not self._authorised():
                    return
                if self.path != "/api/v1/nodes":
                    return self._send(404, status(404, "NotFound", "the server could not find the requested resource"))
                items = [{"apiVersion": "v1", "kind": "Node", **n} for n in server.nodes.values()]
                self._send(200, {"kind": "NodeList", "apiVersion": "v1", "metadata": {}, "items": items})

            def do_PATCH(self):
                if not self._authorised():
                    return
                name = self.path.removeprefix("/api/v1/nodes/")
                if self.headers.get("Content-Type") != "application/merge-patch+json":
                    return self._send(415, status(415, "UnsupportedMediaType", "the body of the request was in an "
                                                  "unknown format"))  # fmt: skip
                if name not in server.nodes:
                    return self._send(404, status(404, "NotFound", f'nodes "{name}" not found'))
                patch = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.patches.append((name, patch))
                server.nodes[name] = merge_patch(server.nodes[name], patch)
                self._send(200, {"apiVersion": "v1", "kind": "Node", **server.nodes[name]})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> FakeApiServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def kubeconfig(self, path, token: str | None = None) -> str:
        path.write_text(
            "apiVersion: v1\nkind: Config\ncurrent-context: test\n"
            f"clusters:\n- name: c\n  cluster:\n    server: {self.url}\n"
            f"users:\n- name: u\n  user:\n    token: {token or self.token}\n"
            "contexts:\n- name: test\n  context:\n    cluster: c\n    user: u\n"
        )
        return str(path)
