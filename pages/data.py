"""Data screen: import files, load the demo, export annotations."""

from __future__ import annotations

import tempfile
from pathlib import Path

import streamlit as st

from pages._shared import current_reviewer, store
from review.demo import load_demo
from review.export import export_annotations, export_carebench_labels
from review.sources import FORMATS, ImportOptions, InputError, import_file
from review.workspace import default_db_path

st.title("Data", anchor=False)
db = store()
reviewer = current_reviewer()
actor = reviewer.name if reviewer else "app"

counts = db.query("SELECT kind, COUNT(*) AS n, SUM(failed) AS failed FROM items GROUP BY kind")
cols = st.columns(max(len(counts), 1) + 1)
for col, row in zip(cols, counts, strict=False):
    col.metric(f"{row['kind']} items", f"{row['n']:,}",
               help=f"{row['failed']} failed" if row["failed"] else None)
cols[-1].metric("annotations", f"{db.scalar('SELECT COUNT(*) FROM annotations'):,}")

st.subheader("Import", anchor=False)
with st.form("import", clear_on_submit=False):
    uploads = st.file_uploader("Files", accept_multiple_files=True,
                               type=["jsonl", "json", "csv", "tsv", "parquet"])
    fmt = st.selectbox("Format", ["detect from content", *FORMATS],
                       help="\n".join(f"- **{f.name}**: {f.description}" for f in FORMATS.values()))
    rater = st.text_input("Rater (for files of machine labels)", placeholder="e.g. openai:gpt-4.1@v1")
    go = st.form_submit_button("Import", type="primary")
if go and uploads:
    with tempfile.TemporaryDirectory() as tmp:
        for up in uploads:
            path = Path(tmp) / Path(up.name).name
            path.write_bytes(up.getvalue())
            try:
                result = import_file(db, path, None if fmt.startswith("detect") else fmt,
                                     ImportOptions(rater=rater or None, actor=actor))
            except InputError as exc:
                st.error(f"{up.name}: nothing was imported. {str(exc).replace(str(path), up.name)}",
                         icon=":material/error:")
            else:
                st.success(result.summary().replace(str(path), up.name), icon=":material/check:")

if not db.scalar("SELECT 1 FROM items LIMIT 1"):
    st.info("The database is empty.")
    if st.button("Load the demo dataset", type="primary"):
        out = Path(default_db_path()).resolve().parent / "carelens-demo-files"
        for line in load_demo(db, out, actor=actor):
            st.write(line)

st.subheader("Export", anchor=False)
with tempfile.TemporaryDirectory() as tmp:
    a_csv = Path(tmp) / "annotations.csv"
    export_annotations(db, a_csv)
    a_jsonl = Path(tmp) / "annotations.jsonl"
    export_annotations(db, a_jsonl)
    labels = Path(tmp) / "carebench_labels.csv"
    n_labels, ties = export_carebench_labels(db, labels)
    c = st.columns(3)
    c[0].download_button("All annotations (CSV)", a_csv.read_bytes(), "carelens_annotations.csv",
                         "text/csv", width="stretch")
    c[1].download_button("All annotations (JSONL)", a_jsonl.read_bytes(),
                         "carelens_annotations.jsonl", "application/jsonl", width="stretch")
    c[2].download_button(f"Clinician labels, CARE-Bench CSV ({n_labels})", labels.read_bytes(),
                         "carebench_labels.csv", "text/csv", width="stretch")
    if ties:
        st.caption(f"{len(ties)} prefixes have no majority label and are left out of the CARE-Bench CSV.")

st.subheader("Imports so far", anchor=False)
rows = db.query("SELECT imported_at, path, format, n_rows, n_items, n_annotations, actor FROM imports ORDER BY id DESC LIMIT 50")
st.dataframe([dict(r) for r in rows], hide_index=True, width="stretch")
