"""Data screen: import files, load the demo, export annotations."""

from __future__ import annotations

import tempfile
from dataclasses import asdict
from pathlib import Path, PurePath

import pandas as pd
import streamlit as st

from labels.llm import (
    MAX_OUTPUT_TOKENS,
    TASKS,
    MissingKeyError,
    PromptError,
    RunAborted,
    collect_batch,
    plan_run,
    run_plan,
    shipped_versions,
    uncollected_batches,
)
from pages._shared import (
    acting_session,
    current_reviewer,
    labels_gate,
    server_mode,
    store,
    viewer,
    viewer_store,
)
from pages._uploads import allow_uploads, spooled_path
from review.datasets.demo import is_empty, load_demo
from review.datasets.export import (
    carebench_labels,
    export_annotations,
    export_carebench_labels,
)
from review.datasets.holdings import annotation_count, import_history, item_counts
from review.datasets.hub import fetch as fetch_from_hub
from review.datasets.sources import FORMATS, ImportOptions, InputError, Limits, import_file
from review.datasets.sources.conversations import parse_mapping
from review.reviewing.blinding import what_reviewer_sees
from review.reviewing.names import plural
from review.team.access import NotAllowed, allowed, open_for, permit
from review.text import safe_markdown
from review.workspace import default_db_path

st.title("Data", anchor=False)
db = store()
reviewer = current_reviewer()
actor = reviewer.name if reviewer else "app"
# On a server (people sign in), importing and paid LLM runs with the server's keys are an
# admin's; local mode trusts this machine's users, as everywhere.
manages = allowed(reviewer, "import", server=server_mode())
if not manages:
    st.info("Importing files and running LLM raters are done by an admin on this server.",
            icon=":material/admin_panel_settings:")

counts_box = st.container()  # filled after any import below, so it shows the new counts


KIND_WORDS = {"prefix": "Prefixes", "response": "Responses", "trajectory": "Agent trajectories",
              "graded_conversation": "Graded conversations", "conversation": "Chats"}


def show_counts() -> None:
    # A graded conversation without a reply is the prompt its replies share: counted
    # apart, as the Graded conversations screen counts only what can be graded.
    counts = item_counts(db)
    cols = counts_box.columns(max(len(counts), 1) + 1)
    for col, row in zip(cols, counts, strict=False):
        notes = [f"{row.failed:,} failed (kept, and shown as failures)"] if row.failed else []
        if row.prompts:
            notes.append(f"and {row.prompts:,} prompts without a reply to grade (the "
                         "conversation the graded replies share)")
        col.metric(KIND_WORDS.get(row.kind, row.kind), f"{row.items - row.prompts:,}",
                   help="; ".join(notes) or None)
    cols[-1].metric("Annotations", f"{annotation_count(db):,}",
                    help="Every answer by every rater, revisions included")


st.subheader("Import", anchor=False)
# A folder (Harbor, CliniCARE) cannot be uploaded: those formats come in by the CLI.
FILE_FORMATS = [f for f in FORMATS.values() if not f.takes_directory]
FORMAT_HELP = ("\n".join(f"- **{f.name}**: {f.description}" for f in FILE_FORMATS)
               + "\n\nFolders (Harbor jobs, CliniCARE trials): `carelens import FOLDER`.")
DETECT = "detect from content"
allow_uploads(manages)  # the server takes uploads only from a session offered the uploader
with st.form("import", clear_on_submit=False):
    uploads = st.file_uploader("Files", accept_multiple_files=True,
                               type=["jsonl", "json", "csv", "tsv", "parquet"]) if manages else None
    fmt = st.selectbox("Format", [DETECT, *(f.name for f in FILE_FORMATS)], help=FORMAT_HELP)
    rater = st.text_input("Rater (for files of machine labels)", placeholder="e.g. openai:gpt-4.1@v1")
    mapping_text = st.text_input(
        "Field mapping (conversations of another shape)",
        placeholder="e.g. id=conversation_id,messages=turns,role=from,content=value",
        help="For the plain conversations format: which of the file's fields is each of "
             "carelens's (id, messages, role, content, model, split, case_id, labels). "
             "Leave it empty for a file written as {id, messages: [{role, content}]}, or for "
             "any published format.")
    go = st.form_submit_button("Import", type="primary", disabled=not manages)
with st.form("hub", clear_on_submit=False):
    hub_name = st.text_input(
        "Or a dataset on the Hugging Face hub", placeholder="hf:ningkko/CARE-Bench:evaluation_prefixes",
        help="`hf:OWNER/NAME:CONFIG`, as the dataset's card names it in `load_dataset(\"OWNER/NAME\","
             " \"CONFIG\")`. The config's files are fetched into the hub's cache on this server"
             " (HF_HUB_OFFLINE=1: from the cache only; HF_TOKEN: a gated dataset's key), then"
             " imported as uploaded files are.")
    hub_fmt = st.selectbox("Format", [DETECT, *(f.name for f in FILE_FORMATS)], help=FORMAT_HELP,
                           key="hub_format")
    fetch_go = st.form_submit_button("Fetch from the hub", icon=":material/cloud_download:",
                                     disabled=not manages)
with st.expander("Limits for one file", icon=":material/tune:"):
    c = st.columns(2)
    max_rows = c[0].number_input("Rows per file, at most", 1, 10 ** 12, Limits.max_rows,
                                 step=100_000, help="A file of more rows is refused.")
    max_mb = c[1].number_input(
        "Megabytes per file, at most", 1, 10 ** 9, Limits.max_bytes // 10 ** 6, step=1000,
        help="A file whose rows take more is refused: a text file's size; a Parquet file's rows"
             " once decompressed (a small Parquet file can stand for far more).")
limits = Limits(max_rows=int(max_rows), max_bytes=int(max_mb) * 10 ** 6)


def import_one(path: Path, name: str, chosen: str, rater_name: str | None,
               recorded: str | None = None, mapping: dict | None = None) -> None:
    """One file, in its own transaction, with its own status line: what went wrong
    with one file is said on its line, and the next file is still imported.
    `name` is how the user knows the file; `recorded`, how the imports record it."""
    shown_name = safe_markdown(name)  # a status label is read as Markdown
    status = st.status(f"Importing {shown_name}…")

    def progress(phase: str, done: int, total: int | None) -> None:
        status.update(label=f"{shown_name}: {done:,} rows read…" if phase == "rows" else
                      f"{shown_name}: committed; adding to the search index, "
                      f"{done:,} of {total:,} items…")
    try:
        result = import_file(db, path, None if chosen == DETECT else chosen,
                             ImportOptions(rater=rater_name, actor=actor, name=recorded or name,
                                           limits=limits, by=reviewer, server=server_mode(),
                                           mapping=mapping or {}),
                             progress=progress)
    except NotAllowed as exc:
        status.update(label=f"{shown_name}: nothing was imported", state="error")
        st.error(safe_markdown(str(exc)), icon=":material/block:")
    except InputError as exc:  # names the file as the user knows it, not by its place here
        status.update(label=f"{shown_name}: nothing was imported", state="error")
        message = str(exc).replace(recorded, name) if recorded else str(exc)
        st.error(safe_markdown(f"{name}: nothing was imported. {message}"), icon=":material/error:")
    except Exception as exc:  # noqa: BLE001 - the next file is still imported
        status.update(label=f"{shown_name}: nothing was imported", state="error")
        st.error(safe_markdown(f"{name}: nothing was imported ({type(exc).__name__}); the other"
                               " files are imported"), icon=":material/error:")
    else:
        status.update(label=f"{shown_name}: imported", state="complete")
        st.success(safe_markdown(result.summary().removeprefix("upload:")),
                   icon=":material/check:")


if (go or fetch_go) and not manages:
    st.error("Only an admin imports files on this server.")
elif go and not uploads:
    st.warning("Choose one or more files to import first (drop them on the box above).",
               icon=":material/upload_file:")
elif go and uploads:
    try:
        mapping = parse_mapping(mapping_text)
    except ValueError as exc:
        st.error(safe_markdown(f"{exc}; nothing was imported"), icon=":material/error:")
        mapping = None
    if mapping is not None:
        with tempfile.TemporaryDirectory() as tmp:
            for up in uploads:
                path = spooled_path(up)  # on disk already under `carelens serve` (pages/_uploads)
                if path is None:
                    path = Path(tmp) / Path(up.name).name
                    path.write_bytes(up.getvalue())
                import_one(path, up.name, fmt, rater or None, recorded=f"upload:{up.name}",
                           mapping=mapping)
elif fetch_go and not hub_name.strip():
    st.warning("Write the dataset's hub name first, e.g. hf:ningkko/CARE-Bench:evaluation_prefixes.",
               icon=":material/cloud_download:")
elif fetch_go:
    bar = st.progress(0.0, text=safe_markdown(f"Fetching {hub_name.strip()}…"))

    def fetching(done: int, total: int | None, files: int, of_files: int) -> None:
        fraction = done / total if total else (files / of_files if of_files else 0.0)
        bar.progress(min(1.0, fraction), text=safe_markdown(
            f"Fetching {hub_name.strip()}: {done / 1e6:,.1f} MB, {files} of {of_files} files"))
    try:
        fetched = fetch_from_hub(hub_name.strip(), fetching)
    except InputError as exc:
        bar.empty()
        st.error(safe_markdown(str(exc)), icon=":material/error:")
    else:
        bar.progress(1.0, text=safe_markdown(fetched.summary()))
        for hub_file in fetched.files:
            import_one(hub_file.local, hub_file.name, hub_fmt, None)

if is_empty(db):
    st.info("The database is empty.")
    if st.button("Load the demo dataset", type="primary", disabled=not manages):
        out = Path(default_db_path()).resolve().parent / "carelens-demo-files"
        try:
            lines = load_demo(db, out, actor=actor, by=reviewer, server=server_mode())
        except NotAllowed as exc:
            st.error(safe_markdown(str(exc)))
        else:
            for line in lines:
                st.write(line)
show_counts()

def _export_file(path: str, reader, write, name: str, session: int | None) -> bytes:
    """One export file, made when its button is pressed (on the download's thread, with a
    connection of its own that reads what `reader` may read), not on every run; only
    while the session it was offered in is in force (a tab left open after Sign out
    downloads nothing)."""
    with open_for(path, reader) as s, tempfile.TemporaryDirectory() as tmp:
        s.session_id = session
        s.require_session()
        out = Path(tmp) / name
        write(s, out)
        return out.read_bytes()


def export_section() -> None:
    # Only the answers this reader may read go in the files (review.team.access).
    path, reader, session = default_db_path(), viewer(), acting_session()
    labels, ties = carebench_labels(viewer_store())  # the count the CSV will hold

    def made(write, name: str):
        return lambda: _export_file(path, reader, write, name, session)

    c = st.columns(3)
    c[0].download_button("All annotations (CSV)", made(export_annotations, "annotations.csv"),
                         "carelens_annotations.csv", "text/csv", width="stretch",
                         on_click="ignore")
    c[1].download_button("All annotations (JSONL)", made(export_annotations, "annotations.jsonl"),
                         "carelens_annotations.jsonl", "application/jsonl", width="stretch",
                         on_click="ignore")
    c[2].download_button(f"Clinician labels, CARE-Bench CSV ({len(labels)})",
                         made(export_carebench_labels, "carebench_labels.csv"),
                         "carebench_labels.csv", "text/csv", width="stretch", on_click="ignore")
    if ties:
        st.caption(f"{plural(len(ties), 'prefix', 'prefixes')} "
                   f"{'has' if len(ties) == 1 else 'have'} no majority label and "
                   f"{'is' if len(ties) == 1 else 'are'} left out of the "
                   "CARE-Bench CSV.")


st.subheader("Export", anchor=False)
if labels_gate("export", stop=False):  # every rater's labels are in the files
    export_section()

st.subheader("Imports so far", anchor=False)
history = pd.DataFrame([asdict(r) for r in import_history(db)],
    columns=["imported_at", "path", "format", "n_rows", "n_items", "n_completed", "n_annotations",
             "actor"])
history["imported_at"] = pd.to_datetime(history["imported_at"], utc=True, format="ISO8601")
# The file's name first (what people recognise), its folder last: long paths cut the name off.
history["folder"] = [str(PurePath(p).parent) if PurePath(p).parent != PurePath(".") else ""
                     for p in history["path"]]
history["path"] = [PurePath(p).name for p in history["path"]]
history = history[["imported_at", "path", "format", "n_rows", "n_items", "n_completed",
                   "n_annotations", "actor", "folder"]]
if what_reviewer_sees(db, reviewer.id if reviewer else None).model_hidden:
    # Files are often named after the model whose replies they hold.
    history["path"] = history["folder"] = "(not shown while items wait for your blind answer)"
st.dataframe(history, hide_index=True, width="stretch", column_config={
    "imported_at": st.column_config.DatetimeColumn("Imported (UTC)", format="YYYY-MM-DD HH:mm:ss"),
    "path": st.column_config.TextColumn("File"),
    "format": st.column_config.TextColumn("Format"),
    "n_rows": st.column_config.NumberColumn("Rows", format="localized"),
    "n_items": st.column_config.NumberColumn("New items", format="localized"),
    "n_completed": st.column_config.NumberColumn(
        "Filled in", format="localized",
        help="Items an earlier file had only named (a prefix first seen in a generations file)"
             " that this import filled in"),
    "n_annotations": st.column_config.NumberColumn("New answers", format="localized"),
    "actor": st.column_config.TextColumn("By"),
    "folder": st.column_config.TextColumn("Folder"),
})

st.subheader("LLM raters", anchor=False)
st.caption("Run the blinded mapper or a rubric judge yourself. Keys come from the environment "
           "(ANTHROPIC_API_KEY, OPENAI_API_KEY, CARELENS_COMPATIBLE_API_KEY) or from "
           "`.streamlit/secrets.toml`; they are never stored. Every call is recorded and cached: "
           "running the same prompt on the same items again costs nothing.")
TASK_WORDS = {"map": "Map CARE-Bench responses (the mapper)", "judge": "Judge rubric criteria",
              "extract": "Read CliniCARE verdicts from reports"}
# Outside the form: the prompt versions offered follow the task chosen.
task = st.selectbox("Task", list(TASK_WORDS), format_func=TASK_WORDS.get)
with st.form("llm_run"):
    c = st.columns([6, 2])
    model_spec = c[0].text_input("Model", "anthropic:claude-haiku-4-5",
                                 help="anthropic:MODEL, openai:MODEL, compatible:MODEL or "
                                      "compatible:http://host:port/v1#MODEL")
    limit = c[1].number_input("At most (0 = all)", 0, 1_000_000, 20)
    c = st.columns([3, 3, 2, 2])
    version = c[0].selectbox("Prompt version", shipped_versions(task),
                             help="The shipped versions of this task's prompt; "
                                  "the CLI also takes a path to your own template")
    dataset = c[1].text_input("Dataset (optional)")
    concurrency = c[2].number_input("Concurrency", 1, 64, 8)
    max_output_tokens = c[3].number_input(
        "Output limit (tokens)", 1, MAX_OUTPUT_TOKENS, TASKS[task].max_output_tokens, step=1024,
        help="Room for each reply. A reply cut off at the limit is left unanswered: "
             "run again with a larger limit")
    use_batch = st.checkbox("Use the provider's batch API (cheaper, slower)")
    estimate = st.form_submit_button("Estimate", icon=":material/calculate:")
    run = st.form_submit_button("Run", type="primary", icon=":material/play_arrow:")


def _secrets_keys() -> dict[str, str]:
    try:
        return {k: str(v) for k, v in st.secrets.items()
                if k in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "CARELENS_COMPATIBLE_API_KEY")}
    except Exception:  # no secrets file
        return {}


def run_permit():
    """Who runs LLM raters here: refused (NotAllowed) unless they may, in this session."""
    return permit(reviewer, "run_llm", server=server_mode(), session=acting_session())


def show_summary(bar, summary) -> None:
    """A run's or a collection's end: its summary, then what it left and why."""
    bar.progress(1.0, text="Done")
    st.success(safe_markdown(summary.text()))
    for message in summary.messages:  # may quote a provider's error or a model's reply
        st.warning(safe_markdown(message))


if (estimate or run) and not manages:
    st.error("Only an admin runs LLM raters on this server (they are paid with its keys).")
elif estimate or run:
    if not version.startswith({"map": "mapper", "judge": "judge", "extract": "extract"}[task]):
        st.error(safe_markdown(f"Prompt version {version} is not a {task} prompt."))
        st.stop()
    try:
        plan = plan_run(db, task, model_spec, version, int(limit) or None,
                        {"dataset": dataset} if dataset else None,
                        max_output_tokens=int(max_output_tokens))
    except (ValueError, PromptError, MissingKeyError) as exc:
        st.error(safe_markdown(str(exc)))
        st.stop()
    st.info(safe_markdown(plan.summary()), icon=":material/receipt_long:")
    if run and plan.units:
        bar = st.progress(0.0, text="Starting")
        try:
            summary = run_plan(default_db_path(), plan, concurrency=int(concurrency),
                               progress=lambda p: bar.progress(p.fraction, text=safe_markdown(p.text())),
                               use_batch=use_batch, keys=_secrets_keys(), actor=actor,
                               permit=run_permit())
        except (RunAborted, MissingKeyError, NotAllowed) as exc:
            st.error(safe_markdown(str(exc)))
        else:
            show_summary(bar, summary)


listed = uncollected_batches(db)
in_hand = [b for b in listed if b.live]
waiting = [b for b in listed if b.state == "stopped"]
unnoted = [b for b in listed if b.state == "id unknown"]
if in_hand:
    st.info(safe_markdown(
        f"{len(in_hand)} batch{'es' if len(in_hand) > 1 else ''} in the hands of a run still "
        "under way: it records the results itself."), icon=":material/hourglass_top:")
    for batch in in_hand:
        st.caption(safe_markdown(batch.text()))
for batch in unnoted:
    st.warning(safe_markdown(batch.text()), icon=":material/help:")
if waiting:
    st.warning(safe_markdown(
        f"{len(waiting)} batch{'es' if len(waiting) > 1 else ''} submitted and not collected yet "
        "(a run stopped while waiting). Their results are paid for: collect them here, or run "
        "the same again."), icon=":material/pending:")
    for batch in waiting:
        st.caption(safe_markdown(batch.text()))
    if st.button("Collect batches", icon=":material/download:", disabled=not manages):
        for batch in waiting:
            bar = st.progress(0.0, text=f"Collecting run {batch.run_id}")
            try:  # no waiting here: a batch still in progress is left for later
                summary = collect_batch(
                    default_db_path(), batch.run_id, keys=_secrets_keys(), max_wait=0.0,
                    progress=lambda p, bar=bar: bar.progress(p.fraction, text=safe_markdown(p.text())),
                    permit=run_permit())
            except (RunAborted, MissingKeyError, LookupError, NotAllowed) as exc:
                st.error(safe_markdown(str(exc)))
            else:
                show_summary(bar, summary)
