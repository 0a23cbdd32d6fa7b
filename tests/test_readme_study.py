"""README's "Your own study": its three files and five commands work as written,
from a codebook file and a conversations file to agreement."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

CARELENS = Path(sys.executable).parent / "carelens"


def section() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("## Your own study")
    return text[start:text.index("\n## ", start + 1)]


def test_the_five_commands_of_your_own_study_work_as_written(tmp_path):
    part = section()
    files = {m.group(2): m.group(3) for m in
             re.finditer(r"```(\w+) ([\w.\-]+)\n(.*?)```", part, re.S)}
    assert sorted(files) == ["chats.jsonl", "harm.toml", "labels.csv"]
    for name, body in files.items():
        (tmp_path / name).write_text(body, encoding="utf-8")
    commands = [line for line in re.search(r"```sh\n(.*?)```", part, re.S).group(1).splitlines()
                if line.strip()]
    assert len(commands) == 5
    outputs = []
    for command in commands:
        argv = shlex.split(command)
        assert argv[0] == "carelens"
        done = subprocess.run([str(CARELENS), *argv[1:]], cwd=tmp_path, capture_output=True,
                              text=True, timeout=180)
        assert done.returncode == 0, (command, done.stderr)
        outputs.append(done.stdout)
    assert "harm-5 version 1.0 (new): 5 labels, ordinal" in outputs[0]
    assert "4 new items, 4 new annotations" in outputs[1]
    assert "8 new annotations" in outputs[2]
    assert "Krippendorff's alpha (ordinal)" in outputs[3] and "All clinicians" in outputs[3]
    assert "Clinicians' majority vs acme-judge@v1" in outputs[4]
