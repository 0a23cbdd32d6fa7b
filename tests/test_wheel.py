"""A plain install is the product: the built wheel, installed into a fresh
virtualenv, runs `carelens demo`, `carelens map --dry-run` and `carelens serve`
from a folder outside the source tree, and the Review screen renders.

Nothing is fetched: the wheel is built with this environment's setuptools,
and the fresh virtualenv installs carelens's dependencies from wheels made of
this environment's own installed distributions (`--no-index`), so what the
wheel leaves out cannot be found anywhere else.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import shutil
import subprocess
import sys
import zipfile
from email.parser import Parser
from importlib import metadata
from pathlib import Path

import pytest

from tests.browser import chromium, running_app, wait_for_app
from tests.conftest import ROOT

pytestmark = [pytest.mark.browser, pytest.mark.timeout(1800)]

LEFT_OUT = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "__pycache__",
                                  ".pytest_cache", ".ruff_cache", "tests", "bench", "*.db*",
                                  "carelens-demo-files", "screenshots")


def run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float = 900) -> str:
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


def _requirements(requires: list[str] | None, extras: frozenset[str] = frozenset()):
    """The distributions needed at run time by these requirements (a
    distribution's Requires-Dist), with the extras asked of them: all but the
    requirements of extras, and those of the extras asked (`extras`)."""
    from packaging.requirements import Requirement

    for line in requires or []:
        req = Requirement(line)
        if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in {"", *extras}):
            yield req.name, frozenset(req.extras)


def _closure(wheel: Path) -> list[metadata.Distribution]:
    """The built wheel's run-time dependencies as installed here, and theirs
    (with the extras asked of them, as `streamlit[auth]`), each once."""
    with zipfile.ZipFile(wheel) as whl:
        info = next(n for n in whl.namelist() if n.endswith(".dist-info/METADATA"))
        requires = Parser().parsestr(whl.read(info).decode()).get_all("Requires-Dist")
    seen: dict[str, metadata.Distribution] = {}
    asked: set[tuple[str, frozenset[str]]] = set()
    todo = list(_requirements(requires))
    while todo:
        name, extras = todo.pop()
        name = re.sub(r"[-_.]+", "-", name).lower()
        if (name, extras) in asked:
            continue
        asked.add((name, extras))
        try:
            dist = seen.setdefault(name, metadata.distribution(name))
        except metadata.PackageNotFoundError:
            pytest.fail(f"{name}, which carelens needs, is not installed here: run make install")
        todo += _requirements(dist.requires, extras)
    return list(seen.values())


def _digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def wheel_of_installed(dist: metadata.Distribution, out: Path) -> Path:
    """A wheel made of an installed distribution's own files (those its RECORD
    lists inside site-packages; scripts are made again from its entry points)."""
    files = [f for f in dist.files or [] if not str(f).startswith("..")
             and not str(f).endswith(".pyc")]
    info = next(f for f in files if str(f).endswith(".dist-info/METADATA")).parent
    wheel_file = Path(dist.locate_file(info / "WHEEL"))
    tags = [line.split(":", 1)[1].strip() for line in wheel_file.read_text().splitlines()
            if line.startswith("Tag:")] or ["py3-none-any"]
    parts = [sorted({t.split("-")[i] for t in tags}) for i in range(3)]
    name = re.sub(r"[-_.]+", "_", dist.metadata["Name"])
    path = out / f"{name}-{dist.version}-{'-'.join('.'.join(p) for p in parts)}.whl"
    record = f"{info}/RECORD"
    lines = []
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as whl:
        for f in files:
            source = Path(dist.locate_file(f))
            if str(f) == record or f.parent == info and f.name in ("INSTALLER", "REQUESTED",
                                                                    "direct_url.json"):
                continue
            if source.is_file():
                data = source.read_bytes()
                whl.writestr(str(f), data)
                lines.append(f"{f},{_digest(data)},{len(data)}")
        whl.writestr(record, "\n".join([*lines, f"{record},,"]) + "\n")
    return path


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh virtualenv with the wheel built from this checkout installed,
    and nothing of the checkout on its path: its `bin` folder."""
    base = tmp_path_factory.mktemp("wheel")
    source, wheels = base / "source", base / "wheels"
    shutil.copytree(ROOT, source, ignore=LEFT_OUT)  # a clean tree: no stale build/ folder
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PIP_"))}
    # No configured index or find-links either: only the wheels made here.
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_CONFIG_FILE=os.devnull)
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "-w", str(wheels), str(source)], base, env)
    built = next(wheels.glob("carelens-*.whl"))
    for dist in _closure(built):
        wheel_of_installed(dist, wheels)
    venv = base / "venv"
    run([sys.executable, "-m", "venv", str(venv)], base, env)
    run([str(venv / "bin" / "python"), "-m", "pip", "install", "--no-index", "--find-links",
         str(wheels), str(built)], base, env)
    return venv / "bin"


def test_the_wheel_holds_the_app_its_pages_assets_config_and_prompts(installed):
    site = next((installed.parent / "lib").glob("python3*/site-packages"))
    app = site / "carelens_app"
    # every page and every asset the checkout has (a new asset left out of the wheel
    # is a screen that fails only once installed: keys.js, carelens.css)
    parts = ["app.py", ".streamlit/config.toml",
             *(p.relative_to(ROOT).as_posix() for p in ROOT.glob("pages/*.py")),
             *(p.relative_to(ROOT).as_posix() for p in ROOT.glob("assets/*"))]
    assert "assets/keys.js" in parts and "pages/review.py" in parts
    for part in parts:
        assert (app / part).is_file(), part
    assert sorted(p.name for p in (site / "labels" / "llm" / "prompts").glob("*.txt"))
    assert not (site / "pages").exists() and not (site / "app.py").exists()  # nothing top-level


def test_an_installed_carelens_runs_demo_map_and_serve_outside_the_source_tree(installed,
                                                                                 tmp_path):
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PATH"] = f"{installed}{os.pathsep}{env.get('PATH', '')}"
    carelens, db = str(installed / "carelens"), work / "study.db"

    out = run([carelens, "--db", str(db), "demo"], work, env)
    assert "demo_evaluation_prefixes.jsonl: carebench-prefixes: 85 rows" in out
    where = run([str(installed / "python"), "-c", "import cli, review; print(cli.__file__);"
                 " print(review.__file__)"], work, env)
    assert str(ROOT) not in where and "site-packages" in where  # the wheel's, not this checkout
    requests = run([carelens, "--db", str(db), "map", "--model", "openai:gpt-4.1-mini",
                    "--prompt-version", "mapper-v2", "--limit", "2", "--dry-run"], work, env)
    assert requests.count('"request"') == 2  # the prompt templates came with the wheel
    run([str(installed / "python"), "-c", "from review.team import ensure_reviewer;"
         " from review.workspace import open_store;"
         f" ensure_reviewer(open_store({str(db)!r}), 'Dr. Wheel')"], work, env)

    with running_app(db, carelens=[carelens], cwd=work, base_env=env) as url, chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(url + "/?reviewer=Dr.+Wheel")
        wait_for_app(page)
        main = page.get_by_test_id("stMain").inner_text()
        assert "Review" in main and "0 of 85 answered by you" in main
        assert page.get_by_role("button", name=re.compile("Urgent care")).count() == 1
        nav = page.get_by_test_id("stSidebarNav").inner_text()
        # st.navigation's menu, not Streamlit's legacy one listing every file of pages/
        assert "Trajectories" in nav and "shared" not in nav.lower()


def _tree(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file under a folder: (size, modification time in ns), by path."""
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts}


def test_an_installed_carelens_runs_a_studys_own_codebook_and_chats(installed, tmp_path):
    """Issue 26 on a plain install: a study's codebooks added from files, its chats and
    published reliability data imported, agreement and the export as from a checkout,
    and nothing written into the installed package."""
    import json

    work = tmp_path / "study"
    shutil.copytree(ROOT / "tests" / "data" / "study", work)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PATH"] = f"{installed}{os.pathsep}{env.get('PATH', '')}"
    carelens, db = str(installed / "carelens"), "study.db"
    site = next((installed.parent / "lib").glob("python3*/site-packages"))
    package = {name: _tree(site / name) for name in ("codebook", "review", "labels", "store",
                                                      "carelens_app")}
    out = run([carelens, "--db", db, "codebook", "add", "harm-5.toml"], work, env)
    assert "harm-5 version 1.0 (new): 5 labels, ordinal" in out
    run([carelens, "--db", db, "codebook", "add", "referral-3.toml"], work, env)
    run([carelens, "--db", db, "import", "chats.jsonl"], work, env)
    run([carelens, "--db", db, "import", "krippendorff.csv"], work, env)
    report = json.loads(run([carelens, "--db", db, "agreement", "--question", "harm.severity",
                             "--a", "group:clinicians", "--json", "--n-boot", "50"], work, env))
    alphas = {c["name"]: round(c["value"], 3) for c in report["coefficients"]}
    assert (alphas["krippendorff_alpha_nominal"], alphas["krippendorff_alpha_ordinal"]) == (
        0.743, 0.815)
    exported = run([carelens, "--db", db, "codebook", "export", "harm-5"], work, env)
    (work / "again.toml").write_text(exported)
    assert "nothing changed" in run([carelens, "--db", db, "codebook", "add", "again.toml"],
                                    work, env)
    assert "harm-5" in run([carelens, "--db", db, "codebook", "list"], work, env)
    for name, files in package.items():
        assert _tree(site / name) == files, f"{name} changed in the installed package"
    assert not list((site / "codebook" / "data").glob("harm*"))
