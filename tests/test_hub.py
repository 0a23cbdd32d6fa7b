"""Datasets by their hub name, `hf:OWNER/NAME[:CONFIG]`, fetched with the real
huggingface_hub from a loopback stand-in for the hub (tests.fake_hub) that
serves the conformance corpus's files, read in place, under cards whose YAML
declares the configs as the datasets' cards do. No test reaches the network:
HF_ENDPOINT is the loopback (conftest points it at a closed port otherwise)."""

from __future__ import annotations

import pytest

from review.datasets.hub import HubSettings, _glob, fetch, parse
from review.datasets.sources import InputError
from tests.conftest import SHARED_DATA, UNREACHABLE
from tests.fake_hub import FakeHub, fake_commit
from tests.helpers import one_line, run_cli, shown, table_counts

CONFORMANCE = SHARED_DATA / "conformance"
CAREBENCH = "ningkko/CARE-Bench"
KLINIKEBENCH = "anon-caa-neurips/KLINIKEBENCH-Trajectories"
PREFIXES = CONFORMANCE / "carebench" / "evaluation_prefixes-train.parquet"
LEADERBOARD = CONFORMANCE / "klinikebench" / "leaderboard-00000-of-00001.parquet"


def card(configs: list[dict]) -> tuple[bytes, dict]:
    """A README.md whose YAML front matter declares `configs`, and the same as the
    hub's parsed cardData."""
    import yaml

    text = "---\n" + yaml.safe_dump({"configs": configs}, sort_keys=False) + "---\n# A card\n"
    return text.encode(), {"configs": configs}


CAREBENCH_CONFIGS = [
    {"config_name": "evaluation_prefixes", "default": True,
     "data_files": [{"split": "train", "path": "evaluation_prefixes/train-*"}]},
    {"config_name": "cases", "data_files": "cases/*.jsonl"},
]
KLINIKEBENCH_CONFIGS = [{"config_name": "leaderboard", "data_files": "data/leaderboard-*.parquet"}]


@pytest.fixture
def hub(monkeypatch, tmp_path):
    """The fake hub with the two datasets, a gated one and one only the hub's Parquet
    conversion has; HF_ENDPOINT points at it, HF_HOME at the test's own cache."""
    with FakeHub() as fake:
        readme, data = card(CAREBENCH_CONFIGS)
        fake.add_dataset(CAREBENCH, {
            "README.md": readme,
            "evaluation_prefixes/train-00000-of-00001.parquet": PREFIXES.read_bytes(),
            "cases/cases.jsonl": b'{"case_id": "inv_case_1"}\n',
        }, card_data=data)
        readme, data = card(KLINIKEBENCH_CONFIGS)
        fake.add_dataset(KLINIKEBENCH, {
            "README.md": readme,
            "data/leaderboard-00000-of-00001.parquet": LEADERBOARD.read_bytes(),
            "data/ablation-00000-of-00001.parquet": b"not this config's",
        }, card_data=data)
        fake.add_dataset("invented/gated-403", {"README.md": readme,
                                                "data/leaderboard-00000-of-00001.parquet": b"x"},
                         card_data=data, gated="manual", gated_status=403)
        fake.add_dataset("invented/gated-401", {"README.md": readme,
                                                "data/leaderboard-00000-of-00001.parquet": b"x"},
                         card_data=data, gated="auto", gated_status=401, gated_api_too=True)
        # No configs in its card: only the hub's own conversion has the config's files.
        fake.add_dataset("invented/converted", {"README.md": b"# no YAML\n",
                                                "raw/prefixes.arrow": b"\x00"})
        fake.add_dataset("invented/converted", {
            "evaluation_prefixes/train/0000.parquet": PREFIXES.read_bytes()},
            revision="refs/convert/parquet")
        monkeypatch.setenv("HF_ENDPOINT", fake.endpoint)
        monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
        yield fake


def db_counts(path):
    from review.workspace import open_store

    s = open_store(path)
    try:
        return table_counts(s)
    finally:
        s.close()


# -- names ----------------------------------------------------------------------

def test_a_hub_name_is_owner_name_and_perhaps_a_config():
    assert parse("hf:ningkko/CARE-Bench:evaluation_prefixes").config == "evaluation_prefixes"
    assert parse("hf:ningkko/CARE-Bench").config is None
    assert str(parse("hf:ningkko/CARE-Bench")) == "hf:ningkko/CARE-Bench"
    with pytest.raises(InputError, match="not a hub name; write hf:OWNER/NAME"):
        parse("hf:ningkko")


def test_data_files_patterns_match_as_datasets_reads_them():
    assert _glob("evaluation_prefixes/train-*", "evaluation_prefixes/train-00000-of-00001.parquet")
    assert not _glob("data/*.parquet", "data/sub/x.parquet")  # * stays in its folder
    assert _glob("data/**/*.parquet", "data/sub/x.parquet") and _glob("**", "a/b/c.csv")
    assert not _glob("train-*", "evaluation_prefixes/train-0.parquet")


# -- fetching and importing -------------------------------------------------------

def test_a_config_by_its_hub_name_lands_its_rows(hub, capsys, tmp_path):
    db = tmp_path / "hub.db"
    code, out, err = run_cli(capsys, "--db", str(db), "import",
                             "hf:ningkko/CARE-Bench:evaluation_prefixes")
    assert (code, err) == (0, "")
    commit = fake_commit(CAREBENCH, "main")
    name = ("hf:ningkko/CARE-Bench:evaluation_prefixes/evaluation_prefixes/"
            "train-00000-of-00001.parquet")
    assert out.splitlines()[0] == (f"hf:ningkko/CARE-Bench:evaluation_prefixes: 1 file at commit"
                                   f" {commit[:12]}")
    assert out.splitlines()[1].startswith(f"{name}: carebench-prefixes: 8 rows, 8 new items")
    from review.workspace import open_store

    s = open_store(db)
    assert s.scalar("SELECT path FROM imports") == name
    assert s.scalar("SELECT COUNT(*) FROM items WHERE kind = 'prefix'") == 8
    gold = s.query("SELECT i.uid, a.value FROM annotations a JOIN items i ON i.id = a.item_id"
                   " JOIN raters r ON r.id = a.rater_id WHERE r.kind = 'reference' ORDER BY i.uid")
    s.close()
    # The same rows as the file imported from its place in the corpus.
    direct = tmp_path / "direct.db"
    assert run_cli(capsys, "--db", str(direct), "import", str(PREFIXES))[0] == 0
    s = open_store(direct)
    assert [tuple(r) for r in gold] == [tuple(r) for r in s.query(
        "SELECT i.uid, a.value FROM annotations a JOIN items i ON i.id = a.item_id"
        " JOIN raters r ON r.id = a.rater_id WHERE r.kind = 'reference' ORDER BY i.uid")]
    s.close()
    assert len(gold) == 8
    # Only the config's file and the card were asked for, at the commit resolved first.
    fetched = [path for method, path in hub.requests if method == "GET" and "/resolve/" in path]
    assert sorted(fetched) == sorted(f"/datasets/{CAREBENCH}/resolve/{commit}/{p}" for p in (
        "README.md", "evaluation_prefixes/train-00000-of-00001.parquet"))


def test_the_default_config_is_taken_when_none_is_named(hub):
    fetched = fetch("hf:ningkko/CARE-Bench")
    assert str(fetched.name) == "hf:ningkko/CARE-Bench:evaluation_prefixes"
    assert [f.path for f in fetched.files] == ["evaluation_prefixes/train-00000-of-00001.parquet"]


def test_a_hub_file_imports_as_the_file_itself_does(hub, capsys, tmp_path):
    """The KlinikeBench leaderboard config: only its own file is fetched, byte for
    byte, and importing it by its hub name gives what importing the corpus file
    gives: the same rows in every table."""
    fetched = fetch("hf:anon-caa-neurips/KLINIKEBENCH-Trajectories:leaderboard")
    assert [f.path for f in fetched.files] == ["data/leaderboard-00000-of-00001.parquet"]
    assert fetched.files[0].local.read_bytes() == LEADERBOARD.read_bytes()

    by_name = run_cli(capsys, "--db", str(tmp_path / "a.db"), "import",
                      "hf:anon-caa-neurips/KLINIKEBENCH-Trajectories:leaderboard")
    direct = run_cli(capsys, "--db", str(tmp_path / "b.db"), "import", str(LEADERBOARD))
    assert by_name[0] == direct[0] == 0
    assert by_name[2] == direct[2] == ""
    assert f"{fetched.files[0].name}: klinikebench: 6 rows, 6 new items" in by_name[1]
    after = db_counts(tmp_path / "a.db")
    assert after["items"] == 6
    assert after == db_counts(tmp_path / "b.db")  # every table holds as many rows


def test_a_second_import_says_already_imported(hub, capsys, tmp_path):
    db = str(tmp_path / "hub.db")
    assert run_cli(capsys, "--db", db, "import", "hf:ningkko/CARE-Bench:evaluation_prefixes")[0] == 0
    before = db_counts(db)
    code, out, _ = run_cli(capsys, "--db", db, "import", "hf:ningkko/CARE-Bench:evaluation_prefixes")
    assert code == 0
    assert "already imported as carebench-prefixes; nothing changed" in out
    assert out.strip().endswith("0 imported, 1 already imported, 0 refused")
    assert db_counts(db) == before


def test_offline_the_cache_serves_and_nothing_is_asked(hub, capsys, tmp_path, monkeypatch):
    fetch("hf:ningkko/CARE-Bench:evaluation_prefixes")
    asked = len(hub.requests)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    db = str(tmp_path / "offline.db")
    code, out, err = run_cli(capsys, "--db", db, "import", "hf:ningkko/CARE-Bench:evaluation_prefixes")
    assert (code, err) == (0, "")
    assert out.splitlines()[0].endswith(", from the cache")
    assert db_counts(db)["items"] == 8
    # A config never fetched is not in the cache: one line, nothing imported.
    code, out, err = run_cli(capsys, "--db", db, "import", "hf:ningkko/CARE-Bench:cases")
    assert code == 2
    cache = tmp_path / "hf_home" / "hub"
    assert one_line(err) == (f"carelens: hf:ningkko/CARE-Bench:cases: not in the cache ({cache}),"
                             " and HF_HUB_OFFLINE is set: fetch it once with a connection\n")
    assert db_counts(db)["items"] == 8
    assert len(hub.requests) == asked


def test_the_hub_out_of_reach_uses_the_cache_and_says_so(hub, capsys, tmp_path, monkeypatch):
    fetch("hf:ningkko/CARE-Bench:evaluation_prefixes")
    monkeypatch.setenv("HF_ENDPOINT", UNREACHABLE.rstrip("/"))  # a closed port: no hub there
    code, out, err = run_cli(capsys, "--db", str(tmp_path / "down.db"), "import",
                             "hf:ningkko/CARE-Bench:evaluation_prefixes")
    assert (code, err) == (0, "") and ", from the cache" in out.splitlines()[0]
    db = tmp_path / "nothing.db"
    code, out, err = run_cli(capsys, "--db", str(db), "import", "hf:invented/never-fetched:x")
    assert code == 2
    assert one_line(err).startswith(f"carelens: hf:invented/never-fetched:x: cannot reach"
                                    f" {UNREACHABLE.rstrip('/')}")
    assert "the dataset is not in the cache" in err


@pytest.mark.parametrize("repo, status", [("invented/gated-403", 403), ("invented/gated-401", 401)])
def test_a_gated_dataset_is_one_line_and_changes_nothing(hub, capsys, tmp_path, repo, status):
    db = tmp_path / "gated.db"
    assert run_cli(capsys, "--db", str(db), "import", str(PREFIXES))[0] == 0
    before = db_counts(db)
    code, out, err = run_cli(capsys, "--db", str(db), "import", f"hf:{repo}:leaderboard")
    assert code == 2
    assert one_line(err) == (
        f"carelens: hf:{repo}:leaderboard: the dataset is gated: accept its conditions at"
        f" {hub.endpoint}/datasets/{repo}, then set HF_TOKEN to an access token of that account\n")
    assert out == "0 imported, 1 refused\n"
    assert db_counts(db) == before
    assert hub.repos[repo].gated_status == status  # 403: signed in, not granted; 401: anonymous


def test_a_key_from_the_environment_opens_a_gated_dataset(hub, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_invented_key")
    fetched = fetch("hf:invented/gated-403:leaderboard")
    assert fetched.files[0].local.read_bytes() == b"x"


@pytest.mark.parametrize("name, message", [
    ("hf:invented/missing:leaderboard",
     "no such dataset at {endpoint} (if it is private, set HF_TOKEN)"),
    ("hf:ningkko/CARE-Bench:evaluation_prefix",
     "no config 'evaluation_prefix' in the dataset; its configs: evaluation_prefixes, cases"),
])
def test_a_missing_dataset_or_config_is_one_line(hub, capsys, tmp_path, name, message):
    db = tmp_path / "missing.db"
    code, _, err = run_cli(capsys, "--db", str(db), "import", name)
    assert code == 2
    assert one_line(err) == f"carelens: {name}: {message.format(endpoint=hub.endpoint)}\n"
    assert db_counts(db)["items"] == 0


def test_several_configs_and_none_default_asks_for_one(hub):
    hub.repos[CAREBENCH].card_data = {"configs": [
        {k: v for k, v in c.items() if k != "default"} for c in CAREBENCH_CONFIGS]}
    with pytest.raises(InputError) as err:
        fetch("hf:ningkko/CARE-Bench")
    assert str(err.value) == ("hf:ningkko/CARE-Bench: the dataset has several configs; name one,"
                              " e.g. hf:ningkko/CARE-Bench:evaluation_prefixes (its configs:"
                              " evaluation_prefixes, cases)")


def test_a_config_only_the_hubs_conversion_has_comes_from_there(hub, capsys, tmp_path):
    code, out, err = run_cli(capsys, "--db", str(tmp_path / "c.db"), "import",
                             "hf:invented/converted:evaluation_prefixes")
    assert (code, err) == (0, "")
    commit = fake_commit("invented/converted", "refs/convert/parquet")
    assert out.splitlines()[0] == (
        f"hf:invented/converted:evaluation_prefixes: 1 file at commit {commit[:12]} (the hub's"
        " Parquet conversion of the config: it may lag the dataset)")
    assert db_counts(tmp_path / "c.db")["items"] == 8


def test_progress_counts_the_bytes_and_files_fetched(hub):
    seen = []
    fetch("hf:ningkko/CARE-Bench:evaluation_prefixes", lambda *a: seen.append(a))
    size = PREFIXES.stat().st_size + len(card(CAREBENCH_CONFIGS)[0])
    assert seen[-1] == (size, size, 2, 2)
    assert [files for _, _, files, _ in seen] == sorted(files for _, _, files, _ in seen)


def test_settings_are_read_when_fetching(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:1/")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    settings = HubSettings.from_env()
    assert (settings.endpoint, settings.cache_dir, settings.offline, settings.token) == (
        "http://127.0.0.1:1", tmp_path / "cache", True, None)


# -- the Data screen ----------------------------------------------------------------

def test_the_data_screen_fetches_and_imports_a_hub_name(hub, tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from tests.conftest import ROOT

    db = tmp_path / "screen.db"
    monkeypatch.setenv("CARELENS_DB", str(db))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    at.switch_page("pages/data.py").run()

    def hub_box():
        return next(t for t in at.text_input if t.label.startswith("Or a dataset on the"))

    hub_box().input("hf:ningkko/CARE-Bench:evaluation_prefixes")
    at.button[1].click().run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    assert "carebench-prefixes: 8 rows, 8 new items" in shown(" ".join(s.value for s in at.success))
    assert db_counts(db)["items"] == 8

    hub_box().input("hf:invented/gated-403:leaderboard")
    at.button[1].click().run()
    assert [e.value for e in at.error] and "the dataset is gated" in shown(at.error[0].value)
    assert db_counts(db)["items"] == 8


def test_a_card_yaml_is_read_offline_from_the_cached_readme(hub, monkeypatch):
    fetch("hf:ningkko/CARE-Bench:evaluation_prefixes")
    hub.stop()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(InputError, match="no config 'nope' in the dataset; its configs:"
                                         " evaluation_prefixes, cases"):
        fetch("hf:ningkko/CARE-Bench:nope")
