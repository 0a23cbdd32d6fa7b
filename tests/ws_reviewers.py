"""Light reviewers that speak Streamlit's own websocket protocol to a running
`carelens serve`, as a browser tab on the Review screen does, without a browser.

Each `LightReviewer` opens one session (ws://.../_stcore/stream), sends the
messages Chromium sends for a reviewer's answer loop (recorded from a real
tab: `record_loop`; the first run, the keys' "live" state, then one rerun
with the answer button's trigger per answer) and reads the server's
ForwardMsgs for what they carry: the item on screen (its answer buttons'
widget ids, `label:<item id>:<code>`), the fragment those buttons belong to,
the address. A message's widget ids come from what the server sent, as the
browser's do, so the replay follows the items the server hands each reviewer.

Used by bench/bench_load_reviewers.py (many reviewers, one answer each every
10 s, every answer checked in the database afterwards) and, as a background
process of other reviewers committing, by browser tests that must hold on a
busy server (`python -m tests.ws_reviewers URL NAME... --every 1`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

WIDGET_ID = re.compile(r"^\$\$ID-[0-9a-f]+-(.*)$")
LABEL = re.compile(r"^label:(\d+):(.+)$")


@dataclass
class Answer:
    """One answer a light reviewer gave: the item, the code, when it was sent
    (time.monotonic()), how long until the server's run for it finished
    (seconds; None: it never did), and the item shown afterwards."""

    item_id: int
    code: str
    sent_at: float
    latency: float | None = None
    next_item: int | None = None


@dataclass
class LightReviewer:
    """One reviewer's session on the Review screen, over the websocket."""

    url: str
    name: str
    kind: str = "prefix"
    query: str = ""
    """More of the address (`&round=3`), after reviewer and kind."""
    answers: list[Answer] = field(default_factory=list)
    widget_ids: dict[str, str] = field(default_factory=dict)
    """{user key: widget id} of every widget the server sent, the latest of each."""
    fragments: dict[str, str] = field(default_factory=dict)
    """{user key: the fragment id of the delta that drew it}."""
    item_id: int | None = None
    labels: dict[str, str] = field(default_factory=dict)
    """{code: user key of its answer button} on the item shown."""
    query_string: str = ""
    page_hash: str = ""
    errors: list[str] = field(default_factory=list)
    sent: list[bytes] = field(default_factory=list)
    """Every BackMsg sent, serialized (compared with Chromium's: `shape`)."""
    _cache: dict[str, ForwardMsg] = field(default_factory=dict)
    _finished: asyncio.Event | None = None
    _ws: object = None
    _reader: asyncio.Task | None = None
    _texts: list[str] = field(default_factory=list)

    # -- the connection ------------------------------------------------------------

    async def open(self, timeout: float = 120) -> None:
        """Connect, run the first screen, say the keys are live, and wait for the item."""
        import websockets

        ws_url = self.url.replace("http://", "ws://") + "/_stcore/stream"
        self._ws = await websockets.connect(ws_url, subprotocols=["streamlit"],
                                            max_size=None, open_timeout=timeout,
                                            ping_interval=None)
        self._finished = asyncio.Event()
        self._reader = asyncio.create_task(self._read())
        self.query_string = f"reviewer={self.name.replace(' ', '+')}&kind={self.kind}{self.query}"
        await self._run(self._rerun(), timeout)
        keys = self._key_of("keys_review")
        if keys is None:
            raise RuntimeError(f"{self.name}: no Review screen keys in the first run: "
                               f"{self.errors or sorted(self.widget_ids)[:20]}")
        # The keys' "live" state (pages/_keys.py gate): the item is drawn in the next run.
        await self._run(self._rerun(states={keys: '{"live":true}'},
                                    fragment=self.fragments.get("keys_review", "")), timeout)
        if self.item_id is None:
            raise RuntimeError(f"{self.name}: no item on screen after the keys went live")

    async def close(self) -> None:
        if self._ws is not None:
            await self._ws.close()
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader

    async def answer(self, code: str | None = None, timeout: float = 120) -> Answer:
        """Press the answer button `code` (default: one of the four at random) on
        the item shown, and wait until the server's run for it has finished."""
        if self.item_id is None or not self.labels:
            raise RuntimeError(f"{self.name}: no item to answer")
        code = code or random.choice(sorted(self.labels))
        item = self.item_id
        answer = Answer(item, code, time.monotonic())
        self.answers.append(answer)
        key = self.labels[code]
        done = await self._run(self._rerun(
            states={self._key_of("keys_review"): '{"live":true}'},
            trigger=self.widget_ids[key], fragment=self.fragments.get(key, "")), timeout)
        if done:
            answer.latency = time.monotonic() - answer.sent_at
            answer.next_item = self.item_id
        return answer

    def screen_text(self) -> str:
        """The Markdown and captions of the last run, joined (what a notice said)."""
        return "\n".join(self._texts)

    # -- messages ------------------------------------------------------------------

    def _key_of(self, key: str) -> str | None:
        return self.widget_ids.get(key)

    def _rerun(self, states: dict[str | None, str] | None = None, trigger: str | None = None,
               fragment: str = "") -> bytes:
        """A rerun_script BackMsg as Chromium sends it (recorded: `record_loop`)."""
        msg = BackMsg()
        rerun = msg.rerun_script
        rerun.query_string = self.query_string
        for wid, value in (states or {}).items():
            if wid is None:
                continue
            w = rerun.widget_states.widgets.add()
            w.id = wid
            w.json_value = value
        if trigger is not None:
            w = rerun.widget_states.widgets.add()
            w.id = trigger
            w.trigger_value = True
        if self.page_hash:
            rerun.page_script_hash = self.page_hash
        if fragment:
            rerun.fragment_id = fragment
        rerun.cached_message_hashes.extend(sorted(self._cache))
        ctx = rerun.context_info
        ctx.timezone, ctx.timezone_offset, ctx.locale = "UTC", 0, "en-US"
        ctx.url, ctx.is_embedded, ctx.color_scheme = self.url + "/", False, "light"
        return msg.SerializeToString()

    async def _run(self, payload: bytes, timeout: float) -> bool:
        """Send a rerun and wait for its run to finish; False on a timeout."""
        self._finished.clear()
        self._texts = []
        self.sent.append(payload)
        await self._ws.send(payload)
        try:
            await asyncio.wait_for(self._finished.wait(), timeout)
            return True
        except TimeoutError:
            self.errors.append(f"no end of run within {timeout} s")
            return False

    async def _read(self) -> None:
        try:
            async for raw in self._ws:
                if isinstance(raw, str):
                    continue
                msg = ForwardMsg()
                msg.ParseFromString(raw)
                self._take(msg)
        except Exception as exc:  # the connection closed: said, never silent
            if not isinstance(exc, asyncio.CancelledError):
                self.errors.append(f"connection: {exc!r}")
                if self._finished is not None:
                    self._finished.set()

    def _take(self, msg: ForwardMsg) -> None:
        kind = msg.WhichOneof("type")
        if kind == "ref_hash":
            cached = self._cache.get(msg.ref_hash)
            if cached is None:
                self.errors.append(f"a cached message we never had: {msg.ref_hash}")
                return
            replay = ForwardMsg()
            replay.CopyFrom(cached)
            replay.metadata.CopyFrom(msg.metadata)
            msg, kind = replay, replay.WhichOneof("type")
        elif msg.metadata.cacheable and msg.hash:
            self._cache[msg.hash] = msg
        if kind == "delta":
            self._delta(msg)
        elif kind == "navigation":
            for page in msg.navigation.app_pages:
                if page.is_default and not self.page_hash:
                    self.page_hash = page.page_script_hash
        elif kind == "page_info_changed":
            self.query_string = msg.page_info_changed.query_string
        elif kind == "script_finished":
            self._finished.set()
        elif kind == "session_event" and msg.session_event.WhichOneof("type") == \
                "script_compilation_exception":
            self.errors.append("the script failed to compile")

    def _delta(self, msg: ForwardMsg) -> None:
        delta = msg.delta
        if delta.WhichOneof("type") != "new_element":
            return
        element = delta.new_element
        which = element.WhichOneof("type")
        sub = getattr(element, which) if which else None
        if which in ("markdown", "alert"):
            self._texts.append(getattr(sub, "body", ""))
        if which == "exception":
            self.errors.append(f"exception on screen: {sub.message}")
        wid = getattr(sub, "id", "") if sub is not None and hasattr(sub, "id") else ""
        found = WIDGET_ID.match(wid) if wid else None
        if not found:
            return
        key = found.group(1)
        self.widget_ids[key] = wid
        self.fragments[key] = delta.fragment_id
        label = LABEL.match(key)
        if label:
            item = int(label.group(1))
            if item != self.item_id:
                self.item_id, self.labels = item, {}
            self.labels[label.group(2)] = key


# -- recording what Chromium sends (bench/bench_load_reviewers.py --record) ---------

def record_loop(url: str, name: str, answers: int = 3) -> list[BackMsg]:
    """The BackMsgs a real Chromium tab sends while `name` opens the Review
    screen and answers `answers` items by key: what `LightReviewer` replays."""
    from tests.browser import chromium, ready_for_keys, wait_for_app

    sent: list[bytes] = []
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 720})
        page.on("websocket", lambda ws: ws.on("framesent", lambda p: sent.append(p)))
        page.goto(f"{url}/?reviewer={name.replace(' ', '+')}&kind=prefix")
        ready_for_keys(page)
        for key in "1234"[:answers]:
            page.keyboard.press(key)
            wait_for_app(page)
        page.close()
    out = []
    for payload in sent:
        msg = BackMsg()
        msg.ParseFromString(payload if isinstance(payload, bytes) else payload.encode())
        out.append(msg)
    return out


def shape(msg: BackMsg) -> tuple:
    """What kind of message it is, without the values that differ between
    sessions: compared between Chromium's recording and the replay."""
    rerun = msg.rerun_script
    return (msg.WhichOneof("type"), bool(rerun.page_script_hash), bool(rerun.fragment_id),
            tuple(sorted({WIDGET_ID.sub(r"\1", w.id).split(":")[0] + ":" + w.WhichOneof("value")
                          for w in rerun.widget_states.widgets
                          if w.WhichOneof("value") in ("trigger_value", "json_value")})))


# -- a background crowd: other reviewers committing while a test runs -------------

async def crowd(url: str, names: list[str], every: float, stop_after: float | None,
                kind: str = "prefix") -> int:
    """Each of `names` answers an item (of `kind`) every `every` seconds (give
    or take a quarter), from a random start, until stopped. Returns the
    answers given."""
    given = [0]

    async def one(name: str) -> None:
        await asyncio.sleep(random.uniform(0, every))
        r = LightReviewer(url, name, kind=kind)
        await r.open()
        try:
            while True:
                await asyncio.sleep(every * random.uniform(0.75, 1.25))
                if r.item_id is None:
                    return
                await r.answer()
                given[0] += 1
        finally:
            await r.close()

    tasks = [asyncio.create_task(one(n)) for n in names]
    try:
        await asyncio.wait(tasks, timeout=stop_after)
        return given[0]
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


@contextlib.contextmanager
def busy_server(url: str, names: list[str], every: float = 1.0,
                kind: str = "prefix") -> Iterator[subprocess.Popen]:
    """Other reviewers (`names`, in the database already) answering items of
    `kind` on the server at `url` every `every` seconds each, in a process of
    their own, for as long as the block runs; the process is stopped at the end."""
    from tests.browser import stop_group

    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.ws_reviewers", url, *names, "--every", str(every),
         "--kind", kind],
        cwd=Path(__file__).resolve().parents[1], start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield proc
    finally:
        stop_group(proc, grace=2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("url")
    ap.add_argument("names", nargs="+")
    ap.add_argument("--every", type=float, default=1.0)
    ap.add_argument("--seconds", type=float, default=None)
    ap.add_argument("--kind", default="prefix", choices=("prefix", "response"))
    a = ap.parse_args()
    given = asyncio.run(crowd(a.url, a.names, a.every, a.seconds, a.kind))
    print(f"{given} answers")


if __name__ == "__main__":
    main()
