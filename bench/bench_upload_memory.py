"""The server's memory after files are uploaded to the Data screen and never imported.

Starts the real server (`carelens serve`, local mode: the uploader is offered)
on an empty database, opens the Data screen in headless Chromium, and uploads
N files of M megabytes each into the uploader without pressing Import. The
figure is the server process's resident memory (VmRSS, from /proc) before the
first upload and once every upload has been received, and where the files are
(carelens keeps them on disk: pages/_uploads.py).

The reference, measured in the same run: Streamlit's own uploader (a
two-line app with `st.file_uploader`, served by `streamlit run`, which keeps
every uploaded file in memory until the browser session ends), the same files
uploaded the same way. `--before REF` measures carelens as it was at a git
revision too (its files exported to a folder and served from there).

    python bench/bench_upload_memory.py [--files 4] [--mb 190] [--before main]
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.browser import (  # noqa: E402
    chromium,
    running_server,
    running_streamlit,
    wait_for_app,
)

REFERENCE_APP = """
import streamlit as st
st.file_uploader("Files", accept_multiple_files=True)
"""


def rss_mb(pid: int) -> float:
    """The process's resident memory, in MB (VmRSS)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def make_files(folder: Path, n: int, mb: int) -> list[Path]:
    """n JSONL files of `mb` megabytes each (distinct contents)."""
    files = []
    line = b'{"prefix_id": "x", "predicted_label": "' + b"a" * 200 + b'"}\n'
    for i in range(n):
        path = folder / f"upload_{i}.jsonl"
        with path.open("wb") as fh:
            block = (line.replace(b"x", str(i).encode()) * 4096)
            written = 0
            while written < mb * 1_000_000:
                fh.write(block)
                written += len(block)
        files.append(path)
    return files


def settle(pid: int, seconds: float = 5) -> float:
    """RSS once it stops moving (after a request's buffers are let go)."""
    time.sleep(seconds)
    return rss_mb(pid)


@contextlib.contextmanager
def reference_server(tmp: Path, max_mb: int):
    """Streamlit's own uploader in a plain script, with the same upload limit."""
    script = tmp / "reference_upload_app.py"
    script.write_text(REFERENCE_APP)
    with running_streamlit(script, "--server.maxUploadSize", str(max_mb)) as served:
        yield served


def upload_after(url, files, wait, before_fn):
    """Open the page, note the memory, upload; yields (before, after)."""
    with chromium() as browser:
        page = browser.new_page()
        page.goto(url)
        wait_for_app(page, timeout=120_000)
        before = before_fn()
        done = []
        page.on("response", lambda r: done.append(r.status)
                if "/_stcore/upload_file/" in r.url and r.request.method == "PUT" else None)
        page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(
            [str(f) for f in files])
        deadline = time.monotonic() + wait
        while len(done) < len(files) and time.monotonic() < deadline:
            page.wait_for_timeout(500)
        if len(done) < len(files) or any(s >= 300 for s in done):
            raise RuntimeError(f"uploads answered {done} of {len(files)}")
        yield before, before_fn()  # the browser still open: the session, and its files, held


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=4)
    ap.add_argument("--mb", type=int, default=190)
    ap.add_argument("--before", metavar="REF", help="also carelens at this git revision")
    args = ap.parse_args()
    limit = args.mb + 10
    wait = 120 + args.files * args.mb  # seconds: a loaded machine moves ~1 MB/s at worst
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        files = make_files(tmp, args.files, args.mb)
        spool = tmp / "spool"
        spool.mkdir()
        db = tmp / "bench.db"
        with running_server(db, timeout=120, env={"TMPDIR": str(spool)}) as (url, proc):
            # `carelens serve` is the server itself (it execs Streamlit): its pid is the server.
            (ours_before, ours_after), = list(upload_after(url + "/data", files, wait,
                                                            lambda: settle(proc.pid)))
            on_disk = sum(f.stat().st_size for f in spool.rglob("*") if f.is_file()) / 1e6
        earlier = None
        if args.before:
            tree = tmp / "before"
            tree.mkdir()
            archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.before],
                                     check=True, capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
            with running_server(tmp / "before.db", timeout=120, cwd=tree,
                                env={"TMPDIR": str(spool)}) as (url, proc):
                (b0, b1), = list(upload_after(url + "/data", files, wait,
                                              lambda: settle(proc.pid)))
            earlier = (b0, b1)
        with reference_server(tmp, limit) as (url, proc):
            (ref_before, ref_after), = list(upload_after(url, files, wait,
                                                          lambda: settle(proc.pid)))
    uploaded = args.files * args.mb
    grew, ref_grew = ours_after - ours_before, ref_after - ref_before
    print(f"{args.files} uploads of {args.mb} MB, never imported ({uploaded} MB):")
    print(f"  carelens serve        RSS {ours_before:7.0f} MB -> {ours_after:7.0f} MB "
          f"({grew:+.0f} MB); {on_disk:.0f} MB spooled to disk")
    if earlier is not None:
        print(f"  carelens at {args.before:<10} RSS {earlier[0]:7.0f} MB -> {earlier[1]:7.0f} MB "
              f"({earlier[1] - earlier[0]:+.0f} MB)")
    print(f"  Streamlit's uploader  RSS {ref_before:7.0f} MB -> {ref_after:7.0f} MB "
          f"({ref_grew:+.0f} MB), in memory")
    print(f"  growth, carelens / Streamlit's own: {grew / ref_grew:.3f}" if ref_grew > 0 else "")


if __name__ == "__main__":
    main()
