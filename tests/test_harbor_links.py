"""A Harbor trial's files are read only inside the trial folder: a trajectory (or
result, reward, report) that is a link pointing outside it is refused in one
line naming the file and saying it points outside the trial, and nothing of the
job is imported. A link that stays inside the trial is followed as before."""

from __future__ import annotations

import json

import pytest

from review.datasets.sources import InputError, import_file
from tests.helpers import one_line, run_cli, table_counts
from tests.test_sources_trajectories import atif_doc, make_trial

SECRET = "Outside text: never imported (invented)."


def outside_trajectory(tmp_path):
    """A valid ATIF document outside the job, whose text must not reach the database."""
    doc = atif_doc(2)
    doc["steps"][-1]["message"] = SECRET
    path = tmp_path / "elsewhere" / "other-study-trajectory.json"
    path.parent.mkdir()
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def job_with_link(tmp_path, relative: str, target):
    """A job of two finished trials; in the second, `relative` is a link to `target`."""
    job = tmp_path / "job"
    make_trial(job, "trial-1", rewards={"reward": 1.0})
    second = make_trial(job, "trial-2", rewards={"reward": 0.0}, report="## Answer: YES\n")
    link = second / relative
    link.unlink(missing_ok=True)
    link.symlink_to(target)
    return job, link


@pytest.mark.parametrize("relative", ["agent/trajectory.json", "result.json",
                                      "verifier/reward.json", "agent/report.md"])
def test_a_link_outside_the_trial_is_refused_and_nothing_is_imported(store, tmp_path, relative):
    job, _ = job_with_link(tmp_path, relative, outside_trajectory(tmp_path))
    before = table_counts(store)
    fmt = "clinicare" if relative == "agent/report.md" else "harbor"
    with pytest.raises(InputError) as err:
        import_file(store, job, fmt)
    message = str(err.value)
    assert message.startswith(f"job/trial-2/{relative}: points outside the trial folder")
    assert "other-study-trajectory.json" in message and "\n" not in message
    assert table_counts(store) == before
    assert not store.scalar("SELECT COUNT(*) FROM items WHERE payload LIKE ?", (f"%{SECRET}%",))


def test_a_trial_imported_alone_with_an_outside_trajectory_is_refused(store, tmp_path):
    job, _ = job_with_link(tmp_path, "agent/trajectory.json", outside_trajectory(tmp_path))
    before = table_counts(store)
    with pytest.raises(InputError, match=r"^trial-2/agent/trajectory.json: points outside the trial"):
        import_file(store, job / "trial-2", "harbor")
    assert table_counts(store) == before


def test_a_link_that_climbs_out_with_dots_is_refused_too(store, tmp_path):
    outside = outside_trajectory(tmp_path)
    job, _ = job_with_link(tmp_path, "agent/trajectory.json",
                           "../../../elsewhere/" + outside.name)  # relative link
    with pytest.raises(InputError, match="points outside the trial folder"):
        import_file(store, job, "harbor")


def test_the_command_line_says_it_in_one_line_exit_2(tmp_path, capsys):
    job, _ = job_with_link(tmp_path, "agent/trajectory.json", outside_trajectory(tmp_path))
    db = tmp_path / "h.db"
    code, out, err = run_cli(capsys, "--db", str(db), "import", "--format", "harbor", str(job))
    assert code == 2
    assert "job/trial-2/agent/trajectory.json: points outside the trial folder" in one_line(err)


def test_a_link_inside_the_trial_is_followed(store, tmp_path):
    job = tmp_path / "job"
    trial = make_trial(job, "trial-1", rewards={"reward": 1.0}, atif=False)
    doc = atif_doc(2)
    doc["steps"][-1]["message"] = "Kept: the run's own text (invented)."
    (trial / "agent" / "runs").mkdir()
    (trial / "agent" / "runs" / "first.json").write_text(json.dumps(doc), encoding="utf-8")
    (trial / "agent" / "trajectory.json").symlink_to("runs/first.json")
    result = import_file(store, job, "harbor")
    assert result.items == 1
    assert store.scalar("SELECT COUNT(*) FROM items WHERE payload LIKE ?",
                        ("%Kept: the run's own text%",)) == 1
