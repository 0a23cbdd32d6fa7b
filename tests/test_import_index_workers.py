"""A large import's search index, its text extracted by worker processes
(`review.browse.index_workers`), holds exactly what the one-process path writes,
and items changed after a worker read them are indexed as they are now."""

from __future__ import annotations

import pytest

from review.browse import index_workers, search
from review.datasets.sources import import_file
from review.workspace import open_store
from tests.helpers import write_jsonl
from tests.test_sources_trajectories import kb_row


def episodes(n: int) -> list[dict]:
    return [kb_row(trial_name=f"kb-task-{i:03d}__aa", task_id=f"kb-task-{i:03d}") for i in range(n)]


def index_rows(store) -> list[tuple]:
    return store.query("SELECT d.item_id, d.target, d.body, d.parts FROM search_docs d"
                       " WHERE d.source = 'item' ORDER BY d.item_id")


def fts_hits(store, word: str) -> int:
    return store.scalar("SELECT COUNT(*) FROM search_fts WHERE search_fts MATCH ?", (word,))


@pytest.fixture
def file(tmp_path):
    return write_jsonl(tmp_path / "episodes.jsonl", episodes(7))


def test_workers_write_what_one_process_writes(tmp_path, file, monkeypatch):
    with open_store(tmp_path / "one.db") as one:
        result = import_file(one, file, "klinikebench")
        assert result.indexed == 7
        expected, hits = index_rows(one), fts_hits(one, "cough")
    calls = []
    real = index_workers.index_in_parallel
    monkeypatch.setattr(index_workers, "PARALLEL_FROM", 2)
    monkeypatch.setattr(index_workers, "PARALLEL_PAYLOAD", 0)
    monkeypatch.setattr(index_workers, "CHUNK", 2)  # 4 chunks, in batches of 4 items
    delivered = []
    real_write = index_workers._write_checked
    monkeypatch.setattr(index_workers, "_write_checked",
                        lambda conn, docs, *f: delivered.append(len(docs)) or real_write(conn, docs, *f))
    monkeypatch.setattr(index_workers, "index_in_parallel",
                        lambda *a, **k: calls.append(len(a[1])) or real(*a, **k))
    with open_store(tmp_path / "many.db") as many:
        import_file(many, file, "klinikebench", index=False)
        progress = []
        assert search.ensure_index(many, batch=4, progress=lambda d, t: progress.append(d)) == 7
        assert calls == [7]  # the workers' path was taken
        assert progress == [4, 7]
        assert delivered == [2, 2, 2, 1]  # every chunk came from a worker
        assert index_rows(many) == expected and len(expected) == 7
        assert fts_hits(many, "cough") == hits > 0
        assert search.unindexed_count(many) == 0


def test_an_item_changed_after_a_worker_read_it_is_indexed_as_it_is_now(tmp_path, file):
    with open_store(tmp_path / "x.db") as store:
        import_file(store, file, "klinikebench", index=False)
        ids = [r[0] for r in store.query("SELECT id FROM items ORDER BY id")]
        docs = index_workers.extract(store.path, ids, search.item_text)
        assert [d[0] for d in docs] == ids
        stale = [(item_id, -1, "stale text", None) for item_id, _, _, _ in docs[:2]]
        with store.transaction() as conn:
            assert index_workers._write_checked(conn, stale + docs[2:], search.index_items,
                                                 search.write_docs) == 7
        bodies = [r["body"] for r in index_rows(store)]
        assert "stale text" not in bodies and len(bodies) == 7


@pytest.mark.parametrize("trouble", ["none starts", "one dies"])
def test_what_the_workers_do_not_deliver_this_process_indexes(tmp_path, file, monkeypatch,
                                                               trouble):
    real = index_workers._start

    def start(db_path, shares):
        procs = real(db_path, shares)
        if trouble == "none starts":
            for proc in procs:
                index_workers._stop(proc)
            return [None] * len(procs)
        procs[0].kill()  # the first worker's chunks never come
        return procs

    monkeypatch.setattr(index_workers, "PARALLEL_FROM", 2)
    monkeypatch.setattr(index_workers, "PARALLEL_PAYLOAD", 0)
    monkeypatch.setattr(index_workers, "CHUNK", 3)
    monkeypatch.setattr(index_workers, "workers", lambda: 2)
    monkeypatch.setattr(index_workers, "_start", start)
    with open_store(tmp_path / "one.db") as one:
        import_file(one, file, "klinikebench")
        expected = index_rows(one)
    with open_store(tmp_path / "x.db") as store:
        import_file(store, file, "klinikebench", index=False)
        assert search.ensure_index(store, batch=3) == 7
        assert index_rows(store) == expected


def test_no_workers_when_the_environment_says_none(tmp_path, file, monkeypatch):
    monkeypatch.setenv(index_workers.WORKERS_ENV, "0")
    monkeypatch.setattr(index_workers, "PARALLEL_FROM", 2)
    monkeypatch.setattr(index_workers, "PARALLEL_PAYLOAD", 0)
    monkeypatch.setattr(index_workers, "index_in_parallel",
                        lambda *a, **k: pytest.fail("workers started"))
    with open_store(tmp_path / "x.db") as store:
        assert import_file(store, file, "klinikebench").indexed == 7


def test_small_items_are_indexed_here_not_by_workers(tmp_path, file, monkeypatch):
    """Workers pay for themselves on large payloads (agent runs), not on many small ones."""
    monkeypatch.setattr(index_workers, "PARALLEL_FROM", 2)
    monkeypatch.setattr(index_workers, "PARALLEL_PAYLOAD", 10**9)
    started = []
    monkeypatch.setattr(index_workers, "index_in_parallel",
                        lambda *a, **k: started.append(1) or 0)
    with open_store(tmp_path / "small.db") as store:
        import_file(store, file, "klinikebench", index=False)
        assert search.ensure_index(store) == 7 and started == []
