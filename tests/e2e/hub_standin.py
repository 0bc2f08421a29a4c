"""A local stand-in for the Hugging Face hub: serves model directories in the hub's URL layout,
with the headers `hf-hub` reads, so that `ferrite serve org/name` downloads from it with
HF_ENDPOINT pointing here.

  GET /api/models/{org}/{name}/revision/{rev}  -> {"id", "sha", "siblings": [{"rfilename"}]}
  GET /{org}/{name}/resolve/{rev}/{file}       -> the bytes; Range honoured (206 +
      Content-Range), ETag (the file's sha256, as the hub gives LFS files), X-Repo-Commit.

`drop_once` names files whose first full download is cut off in the middle: the headers
promise the whole file, half of it is sent, and the connection is closed.
"""

import hashlib
import json
import re
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

COMMIT = "0123456789abcdef0123456789abcdef01234567"
RESOLVE = re.compile(r"^/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$")
INFO = re.compile(r"^/api/models/([^/]+/[^/]+)/revision/([^/]+)$")
CHUNK = 1 << 20


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            h.update(block)
    return h.hexdigest()


class Repo:
    def __init__(self, directory: Path, extra_files: dict[str, bytes]):
        self.files = {p.name: p for p in sorted(directory.iterdir()) if p.is_file()}
        # Files a real repository carries that a model load must not fetch.
        self.extra = extra_files
        self.etags = {name: sha256_of(p) for name, p in self.files.items()}

    def names(self):
        return sorted([*self.files, *self.extra])

    def content_length(self, name):
        return self.files[name].stat().st_size if name in self.files else len(self.extra[name])


class HubStandIn:
    def __init__(self, repos: dict[str, Repo], drop_once=()):
        self.repos = repos
        self.drop_pending = set(drop_once)
        self.requests = []  # (path, Range header or None)
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()

    def requested(self, suffix):
        with self.lock:
            return [r for r in self.requests if r[0].endswith(suffix)]

    def _handler(self):
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                with hub.lock:
                    hub.requests.append((self.path, self.headers.get("Range")))
                if m := INFO.match(self.path):
                    return self.info(*m.groups())
                if m := RESOLVE.match(self.path):
                    return self.resolve(*m.groups())
                self.send_error(404)

            def info(self, repo_id, revision):
                repo = hub.repos.get(repo_id)
                if repo is None or revision != "main":
                    return self.json(404, {"error": "Repository not found"})
                siblings = [{"rfilename": n} for n in repo.names()]
                self.json(200, {"id": repo_id, "sha": COMMIT, "siblings": siblings})

            def json(self, status, body):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def resolve(self, repo_id, revision, name):
                repo = hub.repos.get(repo_id)
                if repo is None or revision != "main" or name not in repo.names():
                    return self.json(404, {"error": "Entry not found"})
                size = repo.content_length(name)
                start, end = 0, size - 1
                if rng := re.match(r"bytes=(\d+)-(\d*)$", self.headers.get("Range", "")):
                    start = int(rng.group(1))
                    end = int(rng.group(2)) if rng.group(2) else size - 1
                length = end - start + 1
                self.send_response(206 if "Range" in self.headers else 200)
                self.send_header("Content-Length", str(length))
                if "Range" in self.headers:
                    self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
                self.send_header("Accept-Ranges", "bytes")
                self.send_header("ETag", f'"{repo.etags.get(name, "extra-" + name)}"')
                self.send_header("X-Repo-Commit", COMMIT)
                self.end_headers()
                with hub.lock:
                    # Not the one-byte metadata request: a transfer of the file.
                    drop = name in hub.drop_pending and length > 1
                    if drop:
                        hub.drop_pending.discard(name)
                if name in repo.extra:
                    self.wfile.write(repo.extra[name][start:end + 1])
                    return
                with open(repo.files[name], "rb") as f:
                    f.seek(start)
                    left = length // 2 if drop else length
                    while left > 0 and (block := f.read(min(CHUNK, left))):
                        self.wfile.write(block)
                        left -= len(block)
                if drop:
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True

        return Handler
