"""A tiny fake Hugging Face Hub for tests (stdlib only).

Serves in-memory dataset repos over plain HTTP on 127.0.0.1 so that
huggingface_hub (2.x, httpx2-based) can run `HfApi().dataset_info`,
`list_repo_tree`/`list_repo_files`, `hf_hub_download` and `snapshot_download`
against it with `endpoint=fake.endpoint` (or HF_ENDPOINT set *before*
huggingface_hub is imported).

Endpoints (what huggingface_hub 2.4 actually calls):
  GET  /api/datasets/{ns}/{name}                       dataset_info / repo_info (revision=None)
  GET  /api/datasets/{ns}/{name}/revision/{rev}        dataset_info(revision=...) ; snapshot_download
  GET  /api/datasets/{ns}/{name}/tree/{rev}[/{path}]   list_repo_tree(recursive=...) ; snapshot_download
  HEAD /datasets/{ns}/{name}/resolve/{rev}/{path}      hf_hub_download metadata (X-Repo-Commit, ETag, size)
  GET  /datasets/{ns}/{name}/resolve/{rev}/{path}      the bytes
  GET  /api/datasets/{ns}/{name}/parquet[/{config}[/{split}]]   Hub's refs/convert/parquet listing
  GET  /api/datasets/{ns}/{name}/parquet/{config}/{split}/{n}.parquet  -> 302 to resolve/refs%2Fconvert%2Fparquet/...

`rev` arrives URL-quoted (refs/convert/parquet -> refs%2Fconvert%2Fparquet): every path
segment is unquoted separately, so branch names with "/" work.

No `X-Xet-*` headers and no `xetHash` in tree entries are ever served, so the
client always uses the plain HTTP GET download path even when `hf_xet` is installed.

Errors are sent the way the Hub sends them: status + `X-Error-Code` (+ `X-Error-Message`),
which huggingface_hub maps to exception classes (the 401-without-code heuristic
in hf_raise_for_status only matches https:// URLs, so the code header matters here).
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, quote, unquote, urlsplit

FAKE_DATE = "2026-03-14T09:30:00.000Z"


def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def fake_commit(repo_id: str, revision: str) -> str:
    """A deterministic 40-hex commit hash (huggingface_hub requires the 40-hex form)."""
    return hashlib.sha1(f"{repo_id}@{revision}".encode()).hexdigest()


def is_lfs_path(path: str) -> bool:
    return path.endswith((".parquet", ".arrow", ".bin", ".safetensors", ".zip", ".gz"))


@dataclass
class FakeRepo:
    repo_id: str
    # revision name -> {path: bytes}
    revisions: dict[str, dict[str, bytes]]
    card_data: dict | None = None
    gated: str | bool = False          # False | "auto" | "manual"
    gated_status: int = 401            # 401 (anonymous) or 403 (logged in, not accepted)
    gated_api_too: bool = False        # also refuse /api/... (default: only file downloads refused)
    commits: dict[str, str] = field(default_factory=dict)

    def commit(self, revision: str) -> str | None:
        if revision in self.commits:
            return self.commits[revision]
        if revision in self.revisions:
            return fake_commit(self.repo_id, revision)
        for rev in self.revisions:  # a commit hash addresses its revision
            if fake_commit(self.repo_id, rev) == revision or self.commits.get(rev) == revision:
                return revision
        return None

    def files(self, revision: str) -> dict[str, bytes] | None:
        if revision in self.revisions:
            return self.revisions[revision]
        for rev in self.revisions:
            if self.commit(rev) == revision:
                return self.revisions[rev]
        return None


class FakeHub:
    def __init__(self) -> None:
        self.repos: dict[str, FakeRepo] = {}
        self.requests: list[tuple[str, str]] = []  # (method, raw path incl. query)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ---- setup -------------------------------------------------------------------------
    def add_dataset(self, repo_id: str, files: dict[str, bytes], *, revision: str = "main",
                    card_data: dict | None = None, **kw) -> FakeRepo:
        repo = self.repos.get(repo_id)
        if repo is None:
            repo = self.repos[repo_id] = FakeRepo(repo_id, {}, card_data=card_data, **kw)
        repo.revisions[revision] = dict(files)
        if card_data is not None:
            repo.card_data = card_data
        return repo

    @property
    def endpoint(self) -> str:
        assert self._server is not None, "call start() first"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> str:
        hub = self

        class Handler(_Handler):
            fake = hub

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self.endpoint

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeHub:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


class _Handler(BaseHTTPRequestHandler):
    fake: FakeHub
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # keep pytest output quiet
        pass

    # ---- helpers -----------------------------------------------------------------------
    def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None,
              content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD" and body:
            self.wfile.write(body)

    def _json(self, obj, status: int = 200, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(obj).encode(), headers)

    def _error(self, status: int, code: str | None, message: str,
               headers: dict[str, str] | None = None) -> None:
        h = dict(headers or {})
        if code:
            h["X-Error-Code"] = code
        h["X-Error-Message"] = message
        self._json({"error": message}, status, h)

    # ---- dispatch ----------------------------------------------------------------------
    def do_HEAD(self) -> None:
        self._dispatch()

    def do_GET(self) -> None:
        self._dispatch()

    def _dispatch(self) -> None:
        self.fake.requests.append((self.command, self.path))
        split = urlsplit(self.path)
        query = parse_qs(split.query)
        # unquote segment by segment so that refs%2Fconvert%2Fparquet stays one segment
        seg = [unquote(s) for s in split.path.split("/")[1:]]
        try:
            if len(seg) >= 3 and seg[0] == "api" and seg[1] == "datasets":
                self._api(seg[2:], query)
            elif len(seg) >= 5 and seg[0] == "datasets" and seg[3] == "resolve":
                self._resolve(f"{seg[1]}/{seg[2]}", seg[4], "/".join(seg[5:]))
            else:
                self._error(404, None, f"no route for {split.path}")
        except BrokenPipeError:
            pass

    def _repo_or_error(self, repo_id: str, *, api: bool) -> FakeRepo | None:
        repo = self.fake.repos.get(repo_id)
        if repo is None:
            # The real Hub answers 401 to anonymous callers and 404 to logged-in ones,
            # always with X-Error-Code: RepoNotFound.
            self._error(404, "RepoNotFound", "Repository not found")
            return None
        if repo.gated and (not api or repo.gated_api_too) and "authorization" not in self.headers:
            self._error(repo.gated_status, "GatedRepo",
                        f"Access to dataset {repo_id} is restricted. You must have access to it "
                        "and be authenticated to access it. Please log in.")
            return None
        return repo

    # ---- /api/datasets/... -------------------------------------------------------------
    def _api(self, seg: list[str], query: dict[str, list[str]]) -> None:
        if len(seg) < 2:
            return self._error(404, None, "bad api path")
        repo_id, rest = f"{seg[0]}/{seg[1]}", seg[2:]
        repo = self._repo_or_error(repo_id, api=True)
        if repo is None:
            return
        if not rest or rest[0] == "revision":
            revision = rest[1] if len(rest) > 1 else "main"
            return self._info(repo, revision, blobs=query.get("blobs", [""])[0].lower() == "true")
        if rest[0] == "tree" and len(rest) >= 2:
            recursive = query.get("recursive", ["false"])[0].lower() == "true"
            return self._tree(repo, rest[1], "/".join(rest[2:]), recursive)
        if rest[0] == "parquet":
            return self._parquet(repo, rest[1:])
        return self._error(404, None, f"no api route {rest}")

    def _sibling(self, path: str, data: bytes, blobs: bool) -> dict:
        s: dict = {"rfilename": path}
        if blobs:
            s.update(blobId=git_blob_sha1(data), size=len(data))
            if is_lfs_path(path):
                s["lfs"] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data),
                            "pointerSize": 134}
        return s

    def _info(self, repo: FakeRepo, revision: str, blobs: bool) -> None:
        files, sha = repo.files(revision), repo.commit(revision)
        if files is None or sha is None:
            return self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
        self._json({
            "_id": hashlib.md5(repo.repo_id.encode()).hexdigest()[:24],
            "id": repo.repo_id,
            "author": repo.repo_id.split("/")[0],
            "sha": sha,
            "lastModified": FAKE_DATE,
            "createdAt": FAKE_DATE,
            "private": False,
            "gated": repo.gated,
            "disabled": False,
            "downloads": 0,
            "likes": 0,
            "tags": ["format:parquet"],
            "cardData": repo.card_data or {},
            "siblings": [self._sibling(p, d, blobs) for p, d in sorted(files.items())],
            "usedStorage": sum(len(d) for d in files.values()),
        })

    def _tree(self, repo: FakeRepo, revision: str, prefix: str, recursive: bool) -> None:
        files, sha = repo.files(revision), repo.commit(revision)
        if files is None or sha is None:
            return self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
        prefix = prefix.strip("/")
        base = prefix + "/" if prefix else ""
        entries: dict[str, dict] = {}
        for path, data in sorted(files.items()):
            if not path.startswith(base):
                continue
            rel = path[len(base):]
            parts = rel.split("/")
            # directory entries for every folder level that is visible
            for i in range(1, len(parts)):
                if not recursive and i > 1:
                    break
                d = base + "/".join(parts[:i])
                entries.setdefault(d, {"type": "directory", "oid": git_blob_sha1(d.encode()),
                                       "size": 0, "path": d})
            if recursive or len(parts) == 1:
                e = {"type": "file", "oid": git_blob_sha1(data), "size": len(data), "path": path}
                if is_lfs_path(path):
                    # NB: no "xetHash" key -> huggingface_hub never tries Xet for this file
                    e["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data),
                                "pointerSize": 134}
                entries[path] = e
        if prefix and not entries:
            return self._error(404, "EntryNotFound", f"{prefix} does not exist on \"{revision}\"",
                               {"X-Repo-Commit": sha})
        self._json(list(entries.values()))

    def _parquet(self, repo: FakeRepo, rest: list[str]) -> None:
        files = repo.files("refs/convert/parquet")
        if files is None:
            return self._error(404, None, "no parquet conversion")
        base = f"{self.fake.endpoint}/api/datasets/{repo.repo_id}/parquet"
        listing: dict[str, dict[str, list[str]]] = {}
        for path in sorted(files):
            parts = path.split("/")
            if len(parts) == 3 and parts[2].endswith(".parquet"):
                config, split, name = parts
                n = int(name.split(".")[0])
                listing.setdefault(config, {}).setdefault(split, []).append(
                    f"{base}/{quote(config)}/{quote(split)}/{n}.parquet")
        if not rest:
            return self._json(listing)
        if len(rest) == 1:
            return self._json(listing.get(rest[0], {}))
        if len(rest) == 2:
            return self._json(listing.get(rest[0], {}).get(rest[1], []))
        config, split, name = rest[0], rest[1], rest[2]
        target = (f"{self.fake.endpoint}/datasets/{repo.repo_id}/resolve/"
                  f"{quote('refs/convert/parquet', safe='')}/{quote(config)}/{quote(split)}/"
                  f"{int(name.split('.')[0]):04d}.parquet")
        self._send(302, b"", {"Location": target})

    # ---- /datasets/.../resolve/... -----------------------------------------------------
    def _resolve(self, repo_id: str, revision: str, path: str) -> None:
        repo = self._repo_or_error(repo_id, api=False)
        if repo is None:
            return
        files, sha = repo.files(revision), repo.commit(revision)
        if files is None or sha is None:
            return self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
        if path not in files:
            return self._error(404, "EntryNotFound", f"Entry not found: {path}",
                               {"X-Repo-Commit": sha})
        data = files[path]
        lfs = is_lfs_path(path)
        etag = hashlib.sha256(data).hexdigest() if lfs else git_blob_sha1(data)
        headers = {
            "X-Repo-Commit": sha,          # REQUIRED: else FileMetadataError
            "ETag": f'"{etag}"',           # REQUIRED: becomes the blob file name
            "Accept-Ranges": "bytes",
        }
        if lfs:                            # what the Hub adds for LFS files
            headers["X-Linked-Etag"] = f'"{etag}"'
            headers["X-Linked-Size"] = str(len(data))
        # Content-Length is set by _send; it is the expected size (HEAD) and is checked after GET.
        self._send(200, data, headers, content_type="application/octet-stream")
