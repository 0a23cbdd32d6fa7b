"""Datasets by their hub name: `hf:OWNER/NAME[:CONFIG]`.

A dataset card says `load_dataset("ningkko/CARE-Bench", "evaluation_prefixes")`;
`hf:ningkko/CARE-Bench:evaluation_prefixes` names the same files. `fetch`
finds the config's files and brings them into huggingface_hub's own cache,
where the normal importers read them (`import_file`, format detected or
chosen), each named by its hub name, not its place in the cache.

Which files belong to a config: the card's YAML `configs:` (what the
dataset's author declared), read at one commit and pinned to it; when the card
declares no such config, or its files are not in a format carelens reads, the
hub's own Parquet conversion (branch `refs/convert/parquet`, its files under
`CONFIG/SPLIT/`). Every split of the config is fetched.

Offline (`HF_HUB_OFFLINE=1`, or the hub out of reach) the cache is used: what
was fetched once imports again with no network. Settings are read from the
environment when `fetch` is called, not when huggingface_hub is imported:
`HF_ENDPOINT` (the hub or a mirror), `HF_HUB_CACHE` / `HF_HOME` (the cache),
`HF_HUB_OFFLINE`, and `HF_TOKEN` for a gated or private dataset (a key comes
from the environment only; huggingface_hub's saved login is not read).

Whatever goes wrong (gated, no such dataset or config, no network and nothing
cached, a full disk) is one InputError of one line naming the dataset; nothing
has been imported by then.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from review.text import plural
from store.writer import InputError

PREFIX = "hf:"
_NAME = re.compile(r"^hf:([A-Za-z0-9][\w.-]*)/([A-Za-z0-9][\w.-]*)(?::([^:/\s]+))?$")
READABLE = (".parquet", ".jsonl", ".ndjson", ".json", ".csv", ".tsv")
"""Suffixes of the files carelens reads (`readers.file_kind`)."""
CONVERTED = "refs/convert/parquet"
"""The branch where the hub keeps its own Parquet copy of a dataset's configs."""

FetchProgress = Callable[[int, "int | None", int, int], None]
"""(bytes fetched, bytes to fetch if known, files fetched, files to fetch)."""


def is_hub_name(text: str) -> bool:
    return str(text).startswith(PREFIX)


@dataclass(frozen=True)
class HubName:
    """`hf:OWNER/NAME[:CONFIG]`."""

    repo: str
    """OWNER/NAME, as the hub spells it."""
    config: str | None = None
    """The card's config name; None: the dataset's default config."""

    def __str__(self) -> str:
        return f"{PREFIX}{self.repo}" + (f":{self.config}" if self.config else "")


def parse(text: str) -> HubName:
    match = _NAME.match(str(text).strip())
    if match is None:
        raise InputError(f"{text}: not a hub name; write hf:OWNER/NAME or hf:OWNER/NAME:CONFIG,"
                         " e.g. hf:ningkko/CARE-Bench:evaluation_prefixes")
    return HubName(f"{match[1]}/{match[2]}", match[3])


@dataclass(frozen=True)
class HubSettings:
    """Where the hub and its cache are, read from the environment at call time."""

    endpoint: str = "https://huggingface.co"
    cache_dir: Path = Path("~/.cache/huggingface/hub")
    offline: bool = False
    token: str | None = None

    @classmethod
    def from_env(cls, environ: Any = None) -> HubSettings:
        env = os.environ if environ is None else environ
        home = env.get("HF_HOME") or os.path.join(
            env.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "huggingface")
        cache = env.get("HF_HUB_CACHE") or os.path.join(home, "hub")
        offline = (env.get("HF_HUB_OFFLINE") or "").strip().lower() in ("1", "true", "yes", "on")
        return cls(endpoint=(env.get("HF_ENDPOINT") or cls.endpoint).rstrip("/"),
                   cache_dir=Path(cache).expanduser(), offline=offline,
                   token=env.get("HF_TOKEN") or None)


@dataclass(frozen=True)
class HubFile:
    path: str
    """Its path in the dataset's repository."""
    local: Path
    """Where huggingface_hub's cache holds it."""
    name: str
    """How it is named in messages and in the record of imports: `hf:OWNER/NAME:CONFIG/path`."""


@dataclass
class Fetched:
    """A config's files, in the cache, at one commit."""

    name: HubName
    """With the config chosen, when the name gave none."""
    commit: str
    files: list[HubFile] = field(default_factory=list)
    converted: bool = False
    """From the hub's Parquet conversion, not the files the card declares."""
    from_cache: bool = False
    """Read from the cache with no request to the hub (offline, or out of reach)."""

    def summary(self) -> str:
        return (f"{self.name}: {plural(len(self.files), 'file')} at commit {self.commit[:12]}"
                + (" (the hub's Parquet conversion of the config: it may lag the dataset)"
                   if self.converted else "")
                + (", from the cache" if self.from_cache else ""))


def fetch(name: str | HubName, progress: FetchProgress | None = None,
          settings: HubSettings | None = None) -> Fetched:
    """The config's files, fetched into the cache (or found there offline)."""
    hub = parse(name) if isinstance(name, str) else name
    settings = settings or HubSettings.from_env()
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    from huggingface_hub.utils import logging as hub_logging

    hub_logging.set_verbosity_error()  # its warnings would be lines beside ours; we say it
    try:
        return _Fetch(hub, settings, progress).run()
    except InputError:
        raise
    except Exception as exc:
        raise InputError(_what_went_wrong(hub, settings, exc)) from None


class _Fetch:
    def __init__(self, hub: HubName, settings: HubSettings, progress: FetchProgress | None):
        from huggingface_hub import HfApi

        self.hub, self.settings, self.progress = hub, settings, progress
        self.api = HfApi(endpoint=settings.endpoint, token=settings.token or False,
                         library_name="carelens")
        self.token = settings.token or False
        self.from_cache = settings.offline

    def run(self) -> Fetched:
        commit = self._commit("main")
        card, files = self._card_and_files(commit)
        configs = card.get("configs") if isinstance(card, dict) else None
        config = self._choose(configs if isinstance(configs, list) else [], files)
        name = HubName(self.hub.repo, config)
        declared = _declared(configs if isinstance(configs, list) else [], config)
        paths = sorted({p for p in files for pattern in declared if _glob(pattern, p)})
        if paths and all(p.lower().endswith(READABLE) for p in paths):
            return self._download(name, commit, paths, converted=False)
        return self._converted(name, declared, paths)

    # -- the commit, the card, the files ------------------------------------
    def _commit(self, revision: str) -> str:
        resolved = self.api.resolve_revision(
            self.hub.repo, repo_type="dataset", revision=revision,
            cache_dir=self.settings.cache_dir, local_files_only=self.settings.offline)
        return resolved.resolved

    def _card_and_files(self, commit: str) -> tuple[dict, list[str]]:
        """The card's YAML and the repository's files at `commit`: from the hub,
        or, offline or when it is out of reach, from the cache."""
        if not self.settings.offline:
            try:
                info = self.api.dataset_info(self.hub.repo, revision=commit)
            except Exception as exc:
                if not _unreachable(exc):
                    raise
                self.from_cache = True
            else:
                card = info.card_data.to_dict() if info.card_data is not None else {}
                return card, [s.rfilename for s in info.siblings or []]
        return self._cached_card(commit), self._cached_files(commit)

    def _snapshot(self, commit: str) -> Path:
        return (self.settings.cache_dir / f"datasets--{self.hub.repo.replace('/', '--')}"
                / "snapshots" / commit)

    def _cached_card(self, commit: str) -> dict:
        from huggingface_hub.repocard import metadata_load

        readme = self._snapshot(commit) / "README.md"
        return (metadata_load(readme) or {}) if readme.is_file() else {}

    def _cached_files(self, commit: str) -> list[str]:
        from huggingface_hub import get_cached_repo_tree

        try:
            return [f.path for f in get_cached_repo_tree(
                self.hub.repo, repo_type="dataset", revision=commit,
                cache_dir=self.settings.cache_dir)]
        except Exception:  # no listing kept: what the snapshot holds
            root = self._snapshot(commit)
            return sorted(str(p.relative_to(root).as_posix()) for p in root.rglob("*")
                          if p.is_file())

    def _choose(self, configs: list, files: list[str]) -> str:
        """The config asked for, or the dataset's default one."""
        names = [c.get("config_name") for c in configs if isinstance(c, dict)]
        names = [n for n in names if isinstance(n, str)]
        if self.hub.config is not None:
            if names and self.hub.config not in names and not self._has_conversion(self.hub.config):
                raise InputError(f"{self.hub}: no config {self.hub.config!r} in the dataset; its"
                                 f" configs: {', '.join(names)}")
            return self.hub.config
        default = [c.get("config_name") for c in configs
                   if isinstance(c, dict) and c.get("default") is True]
        if default:
            return default[0]
        if "default" in names or not names:
            return "default"
        if len(names) == 1:
            return names[0]
        raise InputError(f"{self.hub}: the dataset has several configs; name one, e.g."
                         f" {self.hub}:{names[0]} (its configs: {', '.join(names)})")

    def _has_conversion(self, config: str) -> bool:
        try:
            return bool(self._converted_files(config))
        except Exception as exc:
            if _not_found(exc) or _unreachable(exc):
                return False
            raise

    def _converted_files(self, config: str) -> tuple[str, list[str]]:
        """(commit, the config's files) of the hub's Parquet conversion."""
        commit = self._commit(CONVERTED)
        if self.settings.offline or self.from_cache:
            files = self._cached_files(commit)
        else:
            files = list(self.api.list_repo_files(self.hub.repo, repo_type="dataset",
                                                  revision=commit))
        return commit, sorted(f for f in files if f.startswith(f"{config}/")
                              and f.lower().endswith(".parquet"))

    def _converted(self, name: HubName, declared: list[str], paths: list[str]) -> Fetched:
        try:
            commit, files = self._converted_files(name.config or "default")
        except Exception as exc:
            if not (_not_found(exc) or _unreachable(exc)):
                raise
            commit, files = "", []
        if files:
            return self._download(name, commit, files, converted=True)
        if paths:
            kinds = sorted({PurePosixPath(p).suffix or p for p in paths})
            raise InputError(f"{name}: its files are {', '.join(kinds)}, which carelens does not"
                             f" read (it reads {', '.join(READABLE)}), and the hub has no Parquet"
                             " copy of the config")
        if declared:
            raise InputError(f"{name}: no file of the repository matches the config's"
                             f" data_files ({', '.join(declared)})"
                             + (" in the cache; fetch it once with a connection"
                                if self.from_cache else ""))
        raise InputError(f"{name}: no config {name.config!r} in the dataset's card, and no Parquet"
                         " copy of it on the hub" + (" in the cache" if self.from_cache else ""))

    # -- the download -------------------------------------------------------
    def _download(self, name: HubName, commit: str, paths: list[str], converted: bool) -> Fetched:
        from huggingface_hub import snapshot_download

        patterns = paths + ([] if converted else ["README.md"])
        root = Path(snapshot_download(
            self.hub.repo, repo_type="dataset", revision=commit, allow_patterns=patterns,
            cache_dir=self.settings.cache_dir, endpoint=self.settings.endpoint,
            token=self.token, local_files_only=self.settings.offline or self.from_cache,
            tqdm_class=_bars(self.progress or _quiet),  # its own bars would print
            library_name="carelens"))
        missing = [p for p in paths if not (root / p).is_file()]
        if missing:
            raise InputError(f"{name}: {missing[0]} is not in the cache"
                             + (f" (nor {len(missing) - 1} more)" if len(missing) > 1 else "")
                             + "; fetch it once with a connection")
        return Fetched(name, commit, [HubFile(p, root / p, f"{name}/{p}") for p in paths],
                       converted=converted, from_cache=self.settings.offline or self.from_cache)


def _declared(configs: list, config: str) -> list[str]:
    """The config's data_files as repository path patterns (its splits together)."""
    for c in configs:
        if not isinstance(c, dict) or c.get("config_name") != config:
            continue
        files = c.get("data_files")
        base = str(c.get("data_dir") or "").strip("/")
        if files is None:
            return [f"{base}/**"] if base else []
        patterns: list[str] = []
        items = files.values() if isinstance(files, dict) else (
            [files] if isinstance(files, str) else files)
        for item in items or []:
            paths = item.get("path") if isinstance(item, dict) else item
            for p in [paths] if isinstance(paths, str) else (paths or []):
                if isinstance(p, str):
                    patterns.append(f"{base}/{p.lstrip('/')}" if base else p.lstrip("/"))
        return patterns
    return []


def _glob(pattern: str, path: str) -> bool:
    """Whether a repository path matches a data_files pattern as `datasets` reads
    it: `*` and `?` within one folder, `**` across folders."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[" and "]" in pattern[i + 1:]:
            j = pattern.index("]", i + 1)
            out.append("[" + pattern[i + 1:j].replace("\\", "\\\\") + "]")
            i = j + 1
        else:
            out.append(re.escape(c))
            i += 1
    return re.fullmatch("".join(out), path) is not None


def _quiet(*_: object) -> None:
    pass


def _bars(progress: FetchProgress) -> type:
    """A tqdm class for snapshot_download that shows nothing and tells `progress`
    how many bytes and files have come. `progress` is called on the caller's
    thread only (a screen can update itself from there), as each file ends;
    the bytes that came on download threads are counted by then."""
    import threading

    from huggingface_hub.utils import tqdm as hub_tqdm

    state = {"bytes": 0, "files": 0, "of_files": 0, "of_bytes": None}
    owner = threading.get_ident()
    lock = threading.Lock()

    class Bar(hub_tqdm):
        def __init__(self, *args: Any, **kwargs: Any):
            self._what = str(kwargs.get("desc") or "")
            self._bytes = kwargs.get("unit") == "B" and self._what.startswith("Downloading")
            kwargs["disable"] = True
            super().__init__(*args, **kwargs)
            if self._what.startswith("Fetching"):
                state["of_files"] = int(kwargs.get("total") or 0)
                progress(state["bytes"], state["of_bytes"], 0, state["of_files"])

        def update(self, n: float | None = 1) -> bool | None:
            with lock:
                if self._bytes:
                    state["bytes"] += int(n or 0)
                    state["of_bytes"] = int(self.total) if self.total else None
                elif self._what.startswith("Fetching"):
                    state["files"] += int(n or 0)
                else:
                    return None
            if threading.get_ident() == owner:
                progress(state["bytes"], state["of_bytes"], state["files"], state["of_files"])
            return None

    return Bar


def _status(exc: BaseException) -> int | None:
    response = getattr(exc, "response", None)
    return getattr(response, "status_code", None)


def _not_found(exc: BaseException) -> bool:
    from huggingface_hub.errors import EntryNotFoundError, RevisionNotFoundError

    return isinstance(exc, (RevisionNotFoundError, EntryNotFoundError)) or _status(exc) == 404


def _unreachable(exc: BaseException) -> bool:
    """Whether the hub could not be reached (no network, hub down, offline)."""
    import httpx2
    from huggingface_hub.errors import (
        LocalEntryNotFoundError,
        OfflineModeIsEnabled,
        RevisionResolutionError,
    )

    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, (httpx2.TransportError, OfflineModeIsEnabled, ConnectionError,
                             TimeoutError, LocalEntryNotFoundError, RevisionResolutionError)):
            return True
        status = _status(seen)
        if status is not None and status >= 500:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _what_went_wrong(hub: HubName, settings: HubSettings, exc: BaseException) -> str:
    """One line for what huggingface_hub raised."""
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    page = f"{settings.endpoint}/datasets/{hub.repo}"
    if isinstance(exc, GatedRepoError):
        if settings.token:
            return (f"{hub}: the dataset is gated, and the account of HF_TOKEN has not been"
                    f" given access: ask for it at {page}")
        return (f"{hub}: the dataset is gated: accept its conditions at {page}, then set HF_TOKEN"
                " to an access token of that account")
    if isinstance(exc, RepositoryNotFoundError):
        return (f"{hub}: no such dataset at {settings.endpoint}"
                + ("" if settings.token else " (if it is private, set HF_TOKEN)"))
    if isinstance(exc, RevisionNotFoundError):
        return f"{hub}: the dataset has no main branch at {settings.endpoint}"
    if _unreachable(exc):
        if settings.offline:
            return (f"{hub}: not in the cache ({settings.cache_dir}), and HF_HUB_OFFLINE is set:"
                    " fetch it once with a connection")
        return (f"{hub}: cannot reach {settings.endpoint}, and the dataset is not in the cache"
                f" ({settings.cache_dir}); connect, or fetch it where there is a connection")
    if isinstance(exc, HfHubHTTPError):
        status = _status(exc)
        text = " ".join(str(exc).split())[:200]
        return f"{hub}: the hub answered {status}: {text}" if status else f"{hub}: {text}"
    if isinstance(exc, OSError) and exc.strerror:
        return f"{hub}: cannot keep it in the cache {settings.cache_dir}: {exc.strerror}"
    text = " ".join(str(exc).split())[:200]
    return f"{hub}: cannot fetch it: {type(exc).__name__}" + (f": {text}" if text else "")
