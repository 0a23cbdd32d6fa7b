"""carelens: the terminal face of the app.

A thin layer over the library: it opens the store and calls the same
functions the app's pages call. Errors in the user's input print one line
naming file, line or field, and exit with status 2 (`import` tries every
file it is given first, and reports each); so does a database the
command cannot use (missing, in a missing folder, not a database, locked)
and an output file in a missing folder. Only `demo`, `import` and `serve`
make a new database; every other command refuses one that does not exist,
so a mistyped --db is never an empty database.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import time
from collections.abc import Callable
from pathlib import Path

from labels.phases import DEFAULT_PHASE, PHASES
from labels.triage import METRIC_KEYS
from review.datasets.sources.readers import Limits
from review.text import plural
from review.workspace import default_db_path, open_store

ROOT = Path(__file__).resolve().parent
COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {}


def command(name: str):
    def inner(fn):
        COMMANDS[name] = fn
        return fn
    return inner


class UsageError(Exception):
    pass


MAKE_DATABASE = {"demo", "import", "serve"}
"""Commands that may make the database file when it does not exist."""
NO_DATABASE = {"formats"}
"""Commands that do not open the database."""
SQLITE_HEADER = b"SQLite format 3\x00"


def check_database(path: str, may_make: bool) -> None:
    """Refuse, in one line, a database path the command cannot use: a folder,
    a missing file (unless the command may make it), a file in a folder that
    does not exist, a file that is not an SQLite database."""
    if path == ":memory:":
        return
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"{path}: is a folder, not a database file")
    if not p.exists():
        if not may_make:
            raise UsageError(f"{path}: no such database (check --db or $CARELENS_DB; "
                             "`carelens import` or `carelens demo` makes a new one)")
        folder = p.resolve().parent
        if not folder.is_dir():
            raise UsageError(f"{path}: cannot make the database: folder {folder} does not exist")
        return
    try:
        with p.open("rb") as fh:
            header = fh.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the database: {exc.strerror}") from None
    if header and header != SQLITE_HEADER:
        raise UsageError(f"{path}: not a database (a carelens database is an SQLite file)")


def output_file(path: str | Path) -> Path:
    """A file the command will write: its folder must exist."""
    out = Path(path)
    if out.is_dir():
        raise UsageError(f"{out}: is a folder; give a file name to write")
    if not out.resolve().parent.is_dir():
        raise UsageError(f"{out}: cannot write it: folder {out.resolve().parent} does not exist")
    return out


_DATABASE_PROBLEMS = (
    ("SQLITE_BUSY", "database is locked: another program is writing to it; try again when it "
                    "has finished"),
    ("SQLITE_LOCKED", "database is locked: another program is writing to it; try again when it "
                      "has finished"),
    ("SQLITE_NOTADB", "not a database (a carelens database is an SQLite file)"),
    ("SQLITE_CORRUPT", "the database file is damaged"),
    ("SQLITE_CANTOPEN", "cannot open the database file (does its folder exist, may you write there?)"),
    ("SQLITE_READONLY", "the database is read-only here: you may not write to it or its folder"),
    ("SQLITE_PERM", "no permission to use the database"),
    ("SQLITE_FULL", "the disk is full"),
    ("SQLITE_IOERR", "the disk could not read or write the database"),
)


def database_problem(exc: sqlite3.Error) -> str | None:
    """What is wrong with the database file, in words, for an SQLite error that
    comes from the file or another program (None: any other error, a bug)."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    for prefix, words in _DATABASE_PROBLEMS:
        if name == prefix or name.startswith(prefix + "_"):
            return words
    return None


@command("demo")
def cmd_demo(args: argparse.Namespace) -> int:
    """Load the demo; into a database holding other items only with --force."""
    from review.datasets.demo import is_empty, items_beside_the_demo, load_demo

    store = open_store(args.db)
    if args.if_empty and not is_empty(store):
        print(f"{args.db}: already holds items; demo not loaded")
        return 0
    others = items_beside_the_demo(store)
    if others and not args.force:
        held = ", ".join(f"{n:,} in {name}" for name, n in others.items())
        raise UsageError(f"{args.db}: holds items that are not demo items ({held}); the demo "
                         "would add invented patients, clinicians and gold labels among them. "
                         "Load it into a new --db, or add --force")
    out_dir = Path(args.files or Path(args.db).resolve().parent / "carelens-demo-files")
    for line in load_demo(store, out_dir):
        print(line)
    return 0


def add_run_options(parser: argparse.ArgumentParser, what: str) -> None:
    """`--model` and `--run`: which runs (`store.runs.select_runs`)."""
    parser.add_argument("--model", help=f"only the {what} of this model (as requested, served"
                        " or aliased): each of its runs apart")
    parser.add_argument("--run", help="only this run: its number or its label (carelens runs)")


def _chosen_runs(store, kind: str, args: argparse.Namespace):
    """The runs `--model` and `--run` name (None: no choice made, every run)."""
    from store.runs import select_runs

    if not getattr(args, "model", None) and not getattr(args, "run", None):
        return None
    return select_runs(store.conn, kind, model=args.model, run=args.run,
                       dataset=getattr(args, "dataset", None))


def _attempt(text: str) -> int:
    """`--attempt`: a whole number from 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"an attempt is a whole number from 1, not {text!r}")
    return value


@command("import")
def cmd_import(args: argparse.Namespace) -> int:
    """Each file in its own transaction: every file is tried, one line each (its
    summary on stdout, or why it was refused on stderr), then the tally. Exit 2
    when any file was refused. A hub name (`hf:OWNER/NAME[:CONFIG]`) stands for
    its config's files, fetched first (`review.datasets.hub`)."""
    from dataclasses import replace

    from review.datasets.hub import is_hub_name
    from review.datasets.sources import ImportOptions, InputError, Limits

    store = open_store(args.db)
    options = ImportOptions(rater=args.rater, dataset=args.dataset, actor=args.actor,
                            replace=args.replace, attempt=args.attempt,
                            limits=Limits(max_rows=args.max_rows, max_bytes=args.max_bytes))
    imported = already = refused = 0

    def tally() -> str:
        return (f"{imported} imported, " + (f"{already} already imported, " if already else "")
                + f"{refused} refused")

    for n, source in enumerate(args.files):
        files: list[tuple[str, str | None]] = [(source, None)]
        if is_hub_name(source):
            try:
                fetched = _fetch_hub(source)
            except InputError as exc:
                refused += 1
                print(f"carelens: {exc}", file=sys.stderr, flush=True)
                continue
            print(fetched.summary(), flush=True)
            files = [(str(f.local), f.name) for f in fetched.files]
        for path, name in files:
            shown = name or path
            try:
                result = _import_one(store, path, args.format, replace(options, name=name))
            except InputError as exc:
                refused += 1
                print(f"carelens: {exc}", file=sys.stderr, flush=True)
                continue
            except _Kept as kept:
                # Committed; stopped while adding its text to the search index.
                imported += 1
                left = len(args.files) - n - 1
                print(kept.result.summary() + "; stopped while adding it to the search index,"
                      " which catches up by itself", flush=True)
                print(f"{tally()}; stopped after {shown} (kept)"
                      + (f", {left} more not tried" if left else ""), flush=True)
                raise kept.__cause__ from None
            except BaseException:
                # Stopped (Ctrl-C, a locked database): the files before this one are
                # kept, this one is not; say which, then how it stopped (main).
                left = len(args.files) - n - 1
                print(f"{tally()}; stopped at {shown} (nothing of it kept)"
                      + (f", {left} more not tried" if left else ""), flush=True)
                raise
            if result.already_imported:
                already += 1
            else:
                imported += 1
            print(result.summary(), flush=True)
    print(tally())
    return 2 if refused else 0


def _fetch_hub(source: str):
    """A hub name's files, fetched into the hub's cache; how far, on a terminal's stderr."""
    from review.datasets.hub import fetch

    show = None
    if sys.stderr.isatty():
        def show(done: int, total: int | None, files: int, of_files: int) -> None:
            size = f"{done / 1e6:,.1f}" + (f" of {total / 1e6:,.1f}" if total else "") + " MB"
            _control(sys.stderr, "\r\033[K")
            print(f"{source}: fetching, {size}, {files} of {of_files} files", end="",
                  file=sys.stderr, flush=True)
    try:
        return fetch(source, show)
    finally:
        if show is not None:
            _control(sys.stderr, "\r\033[K")


class _Kept(Exception):
    """An import committed, then stopped while its text was added to the search
    index (which catches up by itself before the next search)."""

    def __init__(self, result):
        super().__init__(result.path)
        self.result = result


def _import_one(store, path: str, fmt: str | None, options):
    """One file, its progress shown on a terminal's stderr and cleared when it ends.
    The search index is caught up after the commit: stopped then, the file is kept
    (`_Kept`, whose cause is what stopped it)."""
    from review.browse.search import ensure_index
    from review.datasets.sources import import_file

    progress = _import_progress(options.name or str(path)) if sys.stderr.isatty() else None
    try:
        result = import_file(store, path, fmt, options, index=False, progress=progress)
        if result.already_imported:
            return result
        try:
            started = time.perf_counter()
            result.indexed = ensure_index(store, progress=None if progress is None else (
                lambda done, due: progress("index", done, due)))
            result.index_seconds = time.perf_counter() - started
        except BaseException as exc:
            raise _Kept(result) from exc
        return result
    finally:
        if progress is not None:
            _control(sys.stderr, "\r\033[K")  # the progress line goes


def _import_progress(name: str):
    """How far an import is, on one line of a terminal's stderr."""
    def show(phase: str, done: int, total: int | None) -> None:
        what = (f"{done:,} rows read" if phase == "rows"
                else f"{done:,} of {total:,} items added to the search index")
        _control(sys.stderr, "\r\033[K")
        print(f"{name}: {what}", end="", file=sys.stderr, flush=True)
    return show


def _size(text: str) -> int:
    """A number of bytes: 4000000000, 4G, 500M, 64K."""
    units = {"k": 10 ** 3, "m": 10 ** 6, "g": 10 ** 9, "t": 10 ** 12}
    value = text.strip().lower().removesuffix("b")
    try:
        if value and value[-1] in units:
            return int(float(value[:-1]) * units[value[-1]])
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 4000000000, 4G, 500M)")\
            from None


@command("formats")
def cmd_formats(args: argparse.Namespace) -> int:
    from review.datasets.sources import AUTO, FORMATS

    for fmt in FORMATS.values():
        print(f"{fmt.name:26} {fmt.description}")
    print(f"{AUTO:26} detect the format from the file (the default)")
    return 0


@command("runs")
def cmd_runs(args: argparse.Namespace) -> int:
    """Every run, with what identifies it and how many items it holds (`store.runs`)."""
    import json

    from store.runs import load_runs

    store = open_store(args.db)
    runs = [r for r in load_runs(store.conn, args.kind, args.dataset) if r.items or args.all]
    if args.json:
        print(json.dumps({"runs": [r.as_dict() for r in runs]}, ensure_ascii=False, indent=2))
        return 0
    if not runs:
        print("no runs yet: import responses, trajectories or graded completions")
        return 0
    for r in runs:
        print(f"{r.id:>4}  {r.label}  ({r.kind}, {r.items:,} item{'' if r.items == 1 else 's'}):"
              f" {r.details()}")
    return 0


@command("export")
def cmd_export(args: argparse.Namespace) -> int:
    from review.datasets.export import (
        ExportError,
        export_annotations,
        export_carebench_labels,
        export_kind,
    )

    if (args.rater or args.model) and args.what == "annotations":
        raise UsageError("--rater and --model are for --what carebench-labels; an annotations "
                         "export holds every rater's answers")
    if args.model and not args.rater:
        raise UsageError("--model chooses which model's responses a rater's labels are"
                         " exported for: give --rater too")
    out = output_file(args.out)
    from labels.provenance import ALL_PHASES, file_digest, provenance, write_sidecar

    try:
        export_kind(out)
        store = open_store(args.db)
        if args.what == "annotations":
            n = export_annotations(store, out, with_identifiers=args.with_identifiers)
            phase, filters = ALL_PHASES, {"with_identifiers": args.with_identifiers}
            print(f"{out}: {plural(n, 'annotation')}")
        else:
            n, ties = export_carebench_labels(store, out, args.rater, args.phase,
                                              model=args.model, run=args.run)
            phase = args.phase
            filters = {k: v for k, v in (("rater", args.rater), ("model", args.model),
                                         ("run", args.run)) if v}
            print(f"{out}: {n} prefix labels")
            for tie in ties:
                print(f"left out, no majority: {tie}", file=sys.stderr)
    except ExportError as exc:
        raise UsageError(str(exc)) from None
    side = write_sidecar(out, provenance(file_digest(out), store=store, phase=phase,
                                         filters=filters, rows=n, export=args.what))
    print(f"{side}: its provenance", file=sys.stderr)
    return 0


def _terminal_progress(progress) -> None:
    width = 30
    filled = int(progress.fraction * width)
    bar = "#" * filled + "-" * (width - filled)
    _control(sys.stderr, "\r")
    print(f"[{bar}] {progress.text()}"[:159].ljust(99), end="", file=sys.stderr, flush=True)


def _run_llm(task: str, args: argparse.Namespace) -> int:
    """map | judge | extract: plan (reads only), print the plan or the dry run,
    then run with bounded concurrency, recording every call."""
    import json

    from labels.llm import MissingKeyError, PromptError, RunAborted, plan_run, run_plan

    filters = {k: v for k, v in (("dataset", args.dataset), ("model", getattr(args, "model_filter", None)),
                                 ("run", getattr(args, "run_filter", None)),
                                 ("split", getattr(args, "split", None)),
                                 ("question", getattr(args, "question", None)),
                                 ("answered_by", getattr(args, "answered_by", None)))
               if v}
    store = open_store(args.db)
    try:
        plan = plan_run(store, task, args.model, args.prompt_version, args.limit, filters,
                        include_answered=args.again, max_output_tokens=args.max_output_tokens)
    except (ValueError, PromptError, MissingKeyError) as exc:
        raise UsageError(str(exc)) from None
    if args.dry_run:
        for request in plan.requests:
            print(json.dumps(request, ensure_ascii=False))
        print(plan.summary(), file=sys.stderr)
        return 0
    print(plan.summary(), file=sys.stderr)
    try:
        summary = run_plan(args.db, plan, concurrency=args.concurrency,
                           progress=_terminal_progress, use_batch=args.batch)
    except (RunAborted, MissingKeyError) as exc:
        print(file=sys.stderr)
        raise UsageError(str(exc)) from None
    print(file=sys.stderr)
    print(summary.text())
    _say_what_to_do(summary)
    return 0 if not summary.errors else 1


def _say_what_to_do(summary) -> None:
    """The run's messages (at most five distinct ones), on stderr: they say what
    to do about what was not answered (a larger output limit, `carelens collect`)."""
    for message in summary.messages:
        print(f"carelens: {message}", file=sys.stderr)


@command("map")
def cmd_map(args: argparse.Namespace) -> int:
    return _run_llm("map", args)


@command("judge")
def cmd_judge(args: argparse.Namespace) -> int:
    return _run_llm("judge", args)


@command("extract")
def cmd_extract(args: argparse.Namespace) -> int:
    return _run_llm("extract", args)


@command("collect")
def cmd_collect(args: argparse.Namespace) -> int:
    """Record the results of batches that runs submitted and never collected
    (a run stopped while waiting): one run's (--run) or every one left."""
    from labels.llm import (
        MissingKeyError,
        RunAborted,
        abandon_batch,
        collect_batch,
        uncollected_batches,
    )

    if (args.batch_id or args.forget) and args.run is None:
        raise UsageError("--batch-id and --forget need --run")
    if args.forget:
        try:
            abandon_batch(args.db, args.run)
        except (LookupError, MissingKeyError, RunAborted) as exc:
            raise UsageError(str(exc)) from None
        print(f"run {args.run}: its batch is forgotten (never submitted, or gone from the"
              " provider); its requests will be asked again")
        return 0
    store = open_store(args.db)
    listed = uncollected_batches(store)
    for batch in listed:
        if batch.live and args.run is None:
            print(f"carelens: {batch.text()}: left to it", file=sys.stderr)
    runs = [args.run] if args.run is not None else [b.run_id for b in listed if not b.live]
    if not runs:
        print("no batch is waiting to be collected")
        return 0
    failed = 0
    for run_id in runs:
        try:
            summary = collect_batch(args.db, run_id, progress=_terminal_progress,
                                    max_wait=args.wait, poll_interval=min(30.0, max(args.wait, 0.01)),
                                    batch_id=args.batch_id)
        except (RunAborted, MissingKeyError, LookupError) as exc:
            print(file=sys.stderr)
            if args.run is not None:
                raise UsageError(str(exc)) from None
            print(f"carelens: run {run_id}: {exc}", file=sys.stderr)
            failed += 1
            continue
        print(file=sys.stderr)
        print(summary.text())
        _say_what_to_do(summary)
        failed += bool(summary.errors)
    return 1 if failed else 0


@command("search")
def cmd_search(args: argparse.Namespace) -> int:
    """Full-text search over patient turns, responses, agent steps and notes."""
    import json

    from review.browse.search import search_lines

    store = open_store(args.db)
    hits = list(search_lines(store, args.query, limit=args.limit))
    for hit in hits:
        if args.json:
            print(json.dumps(hit, ensure_ascii=False))
        else:
            print(f"{hit['item_id']}  [{hit['kind']}]  {hit['snippet']}")
    if args.json:  # the last line: what the hits were found in
        from labels.provenance import Digest, provenance

        digest = Digest()
        for hit in hits:
            digest.add(hit["item_id"], hit["kind"], hit["snippet"])
        print(json.dumps({"provenance": provenance(
            digest, store=store, phase="all", query=args.query, limit=args.limit)},
            ensure_ascii=False))
    return 0


AGREEMENT_FILTERS = ("dataset", "split", "model", "run", "pool", "round", "category", "phase",
                     "include_cannot_assess")
"""The Agreement screen's sidebar filters, as `carelens agreement` options."""
TRIAGE_FILTERS = ("dataset", "split", "round", "category", "phase")
"""The filters the screen's Triage & leaderboard tab applies (it ignores the model:
a leaderboard ranks every model; 'cannot assess' never enters triage)."""


def add_filter_options(parser: argparse.ArgumentParser, names: tuple[str, ...]) -> None:
    """The screen's filters as options, in the sidebar's words."""
    helps = {
        "dataset": ("--dataset", dict(help="only items of this dataset")),
        "split": ("--split", dict(help="only items of this split, e.g. validation")),
        "model": ("--model", dict(help="only the responses (trajectories, completions) of this"
                                       " model, by its name as requested, served or aliased, or"
                                       " a run's label: every run of it (carelens runs)")),
        "run": ("--run", dict(help="only this run: its number or its label (carelens runs)")),
        "pool": ("--pool", dict(action="store_true",
                                help="with --model naming several runs: take them together"
                                     " (by default a single figure over several runs is"
                                     " refused, naming them)")),
        "round": ("--round", dict(type=int, metavar="N",
                                  help="only this CARE-Bench conversation round (1-3)")),
        "category": ("--category", dict(help="only items of this category (HealthBench "
                                              "category, CARE-Bench specialty)")),
        "phase": ("--phase", dict(choices=PHASES, metavar="PHASE", default=DEFAULT_PHASE,
                                  help="which of the clinicians' answers: "
                                       f"{', '.join(PHASES)} (default {DEFAULT_PHASE}: each "
                                       "one's answer given before any machine label was seen, "
                                       "imported answers included; current: the latest, "
                                       "after any reveal). Machine and reference labels are "
                                       "never filtered")),
        "include_cannot_assess": ("--count-cannot-assess", dict(
            action="store_true", dest="include_cannot_assess",
            help="count 'cannot assess' as an answer (one more, unordered category: an "
                 "ordinal label set is then compared with nominal statistics); by default "
                 "it is a missing rating")),
    }
    for name in names:
        flag, kwargs = helps[name]
        parser.add_argument(flag, **kwargs)


def add_bootstrap_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--n-boot", type=int, default=1000, metavar="N",
                        help="bootstrap resamples for every interval (default 1000; 0: none)")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the bootstrap: the same data and seed give the same "
                             "intervals (default 0)")


def filters_of(args: argparse.Namespace, names: tuple[str, ...], store=None):
    """The options' filters, read by the same code as the screen's
    (``labels.compare.filters_from``). `--run` (a number or label) is resolved on `store`
    to one run: its number, and its label as the model filter (as the screen names it);
    a label several runs share (one per kind of item) is refused, naming them."""
    from labels.compare import filters_from
    from store.runs import one_run, select_runs

    values = {name: getattr(args, name) for name in names if name not in ("run", "pool")}
    model, run = getattr(args, "model", None), getattr(args, "run", None)
    if store is not None and run:
        (chosen,) = one_run(select_runs(store.conn, model=model, run=run), f"--run {run!r}")
        values["run"], values["model"] = chosen.id, chosen.label
    return filters_from(values)


def one_run_compared(store, question: str, filters, args: argparse.Namespace) -> None:
    """A single figure over several runs is refused unless `--pool`: the runs the
    compared items belong to, under a `--model` that names several, are named."""
    from labels.compare import load_answers
    from store.runs import load_runs, one_run

    if not filters.model or filters.run is not None or getattr(args, "pool", False):
        return
    ids = {u.run_id for u in load_answers(store, question, filters).units} - {None}
    one_run([r for r in load_runs(store.conn) if r.id in ids], f"--model {filters.model!r}")


@command("agreement")
def cmd_agreement(args: argparse.Namespace) -> int:
    """Two raters (or groups) on the (item, question) pairs they share."""
    from labels.compare import agreement_bundle, agreement_report, format_report_text
    from labels.provenance import write_sidecar
    from labels.report import report_csv, report_html, report_json, report_provenance

    for path in (args.html, args.csv):
        if path:
            output_file(path)
    store = open_store(args.db)
    by = [b.strip() for b in args.by.split(",")] if args.by else []
    try:
        filters = filters_of(args, AGREEMENT_FILTERS, store)
        one_run_compared(store, args.question, filters, args)
        boot = dict(n_boot=args.n_boot, seed=args.seed, bootstrap_by=args.bootstrap_by)
        if args.html:
            report, extras = agreement_bundle(store, args.question, args.a, args.b, filters,
                                              by=by, **boot)
        else:
            report, extras = agreement_report(store, args.question, args.a, args.b, filters,
                                              by=by, **boot), ()
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.html:
        Path(args.html).write_text(report_html(report, extras), encoding="utf-8")
        print(f"{args.html}: report written", file=sys.stderr)
    if args.csv:
        Path(args.csv).write_text(report_csv(report), encoding="utf-8")
        side = write_sidecar(args.csv, report_provenance(report))
        print(f"{args.csv}: table written (provenance in {side})", file=sys.stderr)
    print(report_json(report) if args.json else format_report_text(report))
    return 0


@command("triage-metrics")
def cmd_triage(args: argparse.Namespace) -> int:
    """CARE-Bench triage metrics per model against gold, clinicians and the mapper."""
    from labels.compare import format_triage_text, triage_comparison
    from labels.report import triage_json

    store = open_store(args.db)
    try:
        # A dataset no CARE-Bench answer is in gives a report that says so (exit 0).
        report = triage_comparison(store, filters_of(args, TRIAGE_FILTERS),
                                   rank_by=args.rank_by, common=args.common,
                                   n_boot=args.n_boot, seed=args.seed)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    print(triage_json(report) if args.json else format_triage_text(report))
    return 0


@command("verify")
def cmd_verify(args: argparse.Namespace) -> int:
    """Whether the record is whole: protections in place, hash chains unbroken.
    One line per problem (exit 1), or one line saying it is whole (exit 0)."""
    from store.verify import verify_file

    verdict = verify_file(args.db)
    for line in verdict.lines():
        print(f"{args.db}: {line}")
    return 0 if verdict.whole else 1


@command("backup")
def cmd_backup(args: argparse.Namespace) -> int:
    """A consistent copy made while the app serves (SQLite's online backup), verified."""
    from store.backup import BackupError, backup

    out = output_file(args.out)
    try:
        made = backup(args.db, out)
    except BackupError as exc:
        raise UsageError(str(exc)) from None
    print(f"{out}: backup of {args.db}, {made.bytes:,} bytes")
    for line in made.verdict.lines():
        print(f"{out}: {line}")
    return 0 if made.verdict.whole else 1


# -- prediction-powered estimates and the label budget (labels.ppi_report, labels.budget) --

PPI_FILTERS = ("dataset", "split", "model", "run")


def _ppi_filters(args: argparse.Namespace, store=None):
    """The items PPI reads: `--model` (each of its runs an estimate of its own) or `--run`."""
    return filters_of(args, PPI_FILTERS, store)


@command("ppi")
def cmd_ppi(args: argparse.Namespace) -> int:
    """A metric per model: PPI, clinicians-only and machine-only estimates, 95% intervals."""
    from labels.ppi_report import format_ppi_text, ppi_json, ppi_report

    store = open_store(args.db)
    try:
        report = ppi_report(store, args.metric, args.human, args.machine, _ppi_filters(args, store),
                            phase=args.phase, sampling=args.sampling, reference=args.reference,
                            question=args.question)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    print(ppi_json(report) if args.json else format_ppi_text(report))
    return 0


@command("plan-labels")
def cmd_plan_labels(args: argparse.Namespace) -> int:
    """How many more clinician labels each sampling design needs for a target half-width."""
    import json

    from labels.budget import format_plan_text, label_plan, plan_dict
    from labels.ppi_readings import default_machine
    from review.team.designs import planning_designs

    store = open_store(args.db)
    try:
        machine = args.machine or default_machine(store, args.metric, args.question)
        plan = label_plan(store, args.metric, args.human, machine, args.target_halfwidth,
                          _ppi_filters(args, store), phase=args.phase, question=args.question,
                          reference=args.reference, replicates=args.replicates,
                          designs_for=lambda key, ids: planning_designs(store, key, ids))
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    from labels.provenance import provenance as provenance_of

    provenance = provenance_of(plan.data, store=store, phase=args.phase,
                               filters=_ppi_filters(args, store),
                               what="label budget", metric=args.metric, human=args.human,
                               machine=machine, target_halfwidth=args.target_halfwidth,
                               replicates=args.replicates, seed=0)
    print(json.dumps(plan_dict(plan, provenance), indent=2, ensure_ascii=False) if args.json
          else f"clinicians: {args.human}; machine: {machine}\n" + format_plan_text(plan))
    return 0


def add_ppi_commands(sub) -> None:
    """The `ppi` and `plan-labels` subcommands."""
    from labels.ppi_readings import METRICS, PHASES
    from labels.sampling import MODES

    for name, what in (
        ("ppi", "prediction-powered estimates of a metric per model: the machine's labels "
                "corrected by clinicians', beside each alone, with 95% intervals"),
        ("plan-labels", "how many more clinician labels each sampling design needs to bring "
                        "each model's PPI interval (and the judge-vs-clinician kappa) under a "
                        "target half-width"),
    ):
        p = sub.add_parser(name, help=what.replace("%", "%%"), description=what)
        p.add_argument("--metric", default="accuracy" if name == "plan-labels" else None,
                       required=name == "ppi", choices=list(METRICS), metavar="NAME",
                       help=f"one of {', '.join(METRICS)}")
        p.add_argument("--human", required=name == "ppi",
                       default="group:majority" if name == "plan-labels" else None,
                       help="a clinician, group:majority or group:adjudicated"
                            + (" (default group:majority)" if name == "plan-labels" else ""))
        p.add_argument("--machine", required=name == "ppi",
                       help="the machine rater (mapper, judge)"
                            + (" (default: the one that read the most)"
                               if name == "plan-labels" else ""))
        p.add_argument("--question-set", "--question", dest="question",
                       help="met_rate / pass_rate: the criteria set, e.g. "
                            "criteria:rubric@graded_conversation (default: the first the "
                            "machine answered)")
        p.add_argument("--reference", help="triage metrics: the rater each response is scored "
                                           "against (default: the prefixes' gold label)")
        for option in PPI_FILTERS:
            add_filter_options(p, (option,))
        p.add_argument("--phase", choices=list(PHASES), default="blind",
                       help="blind (default): clinicians' answers given before any machine "
                            "label was seen, and imported ones; current: each one's latest")
        if name == "ppi":
            p.add_argument("--sampling", choices=MODES, default="auto",
                           help="auto (default): labels from designed review rounds only, "
                                "else every label assumed a uniform random sample (said in "
                                "the output); assume-uniform: every label as uniform; design: "
                                "designed labels only")
        else:
            p.add_argument("--target-halfwidth", type=float, required=True, metavar="H",
                           help="the 95%% half-width to reach, e.g. 0.05")
            p.add_argument("--replicates", type=int, default=120,
                           help="simulated studies per design and size (default 120)")
        p.add_argument("--json", action="store_true")




@command("healthbench-score")
def cmd_healthbench_score(args: argparse.Namespace) -> int:
    """HealthBench scores as simple-evals computes them, for every rater that graded."""
    import json

    from labels.healthbench_score import (
        format_scores_text,
        healthbench_scores,
        scores_dict,
        scores_provenance,
    )

    store = open_store(args.db)
    try:
        runs = _chosen_runs(store, "graded_conversation", args)
        report = healthbench_scores(store, dataset=args.dataset, split=args.split,
                                    phase=args.phase, n_boot=args.n_boot, seed=args.seed,
                                    runs=runs, pool=args.pool)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print(json.dumps(scores_dict(report, scores_provenance(report)), indent=2,
                         ensure_ascii=False, allow_nan=False))
    else:
        print(format_scores_text(report))
    return 0


APP_FOLDER = "carelens_app"
"""Where an installed wheel keeps the browser face (app.py, pages/, assets/,
.streamlit/config.toml): a folder beside this module (setup.py puts it there).
A source checkout, or an editable install of one, has them beside this file."""


def app_dir() -> Path:
    """The folder of app.py and its pages, in an installed wheel or a checkout."""
    for where in (ROOT / APP_FOLDER, ROOT):
        if (where / "app.py").is_file() and (where / "pages").is_dir():
            return where
    raise UsageError(f"{ROOT}: the app (app.py and pages/) is not installed here; "
                     "reinstall carelens")


@command("serve")
def cmd_serve(args: argparse.Namespace) -> int:
    app = app_dir()
    env = dict(os.environ, CARELENS_DB=str(Path(args.db).resolve()))
    # app.py starts the server itself when run as a program (see its top): only the
    # browser face imports Streamlit, and it sets the one switch Streamlit needs first.
    cmd = [sys.executable, str(app / "app.py"), "run", str(app / "app.py"),
           "--server.port", str(args.port), "--server.address", args.address,
           "--browser.gatherUsageStats", "false", "--server.headless", "true"]
    print(f"carelens: serving {args.db} at http://{args.address}:{args.port}", flush=True)
    # Become the server rather than wait for it: a stop signal (a service manager's
    # SIGTERM, a test's) then reaches Streamlit itself, and no server is left behind.
    # From the app's folder: Streamlit reads its .streamlit/config.toml there.
    os.chdir(app)
    os.execve(sys.executable, cmd, env)
    return 0  # pragma: no cover - execve does not return


def _account() -> str:
    """The account running the command, for the audit log."""
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a bare container)
        return os.environ.get("USER") or f"uid {os.getuid()}"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="carelens",
        description="Clinician review of medical AI benchmarks, and how far automated graders can be trusted.",
    )
    p.add_argument("--db", default=default_db_path(),
                   help="database file (default: $CARELENS_DB or carelens.db)")
    sub = p.add_subparsers(dest="command", required=True)

    d = sub.add_parser("demo", help="load the deterministic demo dataset")
    d.add_argument("--if-empty", action="store_true", help="only when the database has no items")
    d.add_argument("--force", action="store_true",
                   help="load it even beside items that are not demo items")
    d.add_argument("--files", help="folder for the generated demo files")

    i = sub.add_parser("import", help="import files (format detected from content)")
    i.add_argument("--format",
                   help="importer name (see `carelens formats`), or auto: detect it from the file"
                        " (the default)")
    i.add_argument("--rater", help="rater whose labels the file carries")
    i.add_argument("--dataset", help="dataset name for new items (default: the format family)")
    i.add_argument("--actor", default=f"cli:{_account()}",
                   help="who is importing, as the audit log names them (default: cli:ACCOUNT,"
                        " the account running the command)")
    i.add_argument("--replace", action="store_true",
                   help="let the files replace answers in force of raters who already exist"
                        " (each audited with its old and new value); without it such a row is"
                        " refused: an import adds answers")
    i.add_argument("--attempt", type=_attempt, metavar="N",
                   help="the files hold attempt N of runs imported before (a run's identity:"
                        " model, protocol, prompt version, provider and attempt); without it,"
                        " the first attempt")
    i.add_argument("--max-rows", type=int, default=Limits.max_rows, metavar="N",
                   help=f"refuse a file of more rows (default {Limits.max_rows:,})")
    i.add_argument("--max-bytes", type=_size, default=Limits.max_bytes, metavar="SIZE",
                   help="refuse a file whose rows take more, as read (a Parquet file's after"
                        f" decompression), e.g. 8G (default {Limits.max_bytes / 1e9:g}G)")
    i.add_argument("files", nargs="+", metavar="FILE",
                   help="a file or folder, or a dataset on the Hugging Face hub as"
                        " hf:OWNER/NAME[:CONFIG] (e.g. hf:ningkko/CARE-Bench:evaluation_prefixes)")

    sub.add_parser("formats", help="list the import formats")

    r = sub.add_parser("runs", help="list the runs: each model's, agent's or grader's run over"
                                    " a benchmark, with what identifies it")
    r.add_argument("--kind", choices=["response", "trajectory", "graded_conversation"],
                   help="only runs of this kind of item")
    r.add_argument("--dataset", help="only runs of this dataset")
    r.add_argument("--all", action="store_true", help="also runs that hold no item (a run's"
                   " placeholders all filled in by another run's file)")
    r.add_argument("--json", action="store_true")

    e = sub.add_parser("export", help="export annotations or CARE-Bench labels")
    e.add_argument("--what", choices=["annotations", "carebench-labels"], required=True)
    e.add_argument("--out", required=True, help="file to write (.csv or .jsonl)")
    e.add_argument("--rater", help="carebench-labels: one rater's labels (default: the settled "
                                   "answer, else the clinicians' majority); a mapper's labels of"
                                   " one model's responses are that model's scorer submission")
    e.add_argument("--model", help="carebench-labels with --rater: the model whose responses'"
                                   " labels to write, when the rater labelled several (a model"
                                   " with several runs, e.g. two protocols: choose with --run)")
    e.add_argument("--run", help="carebench-labels with --rater: the run (its number or label,"
                                 " carelens runs) whose responses' labels to write")
    e.add_argument("--with-identifiers", action="store_true",
                   help="include identifying ids (e.g. CliniCARE task ids); withheld by default")
    e.add_argument("--phase", choices=PHASES, default=DEFAULT_PHASE, metavar="PHASE",
                   help="carebench-labels: which of the clinicians' answers make the label "
                        f"({', '.join(PHASES)}; default {DEFAULT_PHASE}: those given before any "
                        "machine label was seen). The file's provenance is written beside it, "
                        "in FILE.provenance.json")

    for task, what, default in (
        ("map", "map CARE-Bench responses onto the four labels with an LLM (the blinded mapper)", "mapper-v1"),
        ("judge", "judge rubric criteria one at a time with an LLM", "judge-v1"),
        ("extract", "read CliniCARE verdicts from agent reports with an LLM", "extract-v1"),
    ):
        m = sub.add_parser(task, help=what, description=what)
        m.add_argument("--model", required=True, metavar="PROVIDER:MODEL",
                       help="anthropic:MODEL, openai:MODEL, compatible:MODEL or "
                            "compatible:http://host:port/v1#MODEL; keys from the environment")
        m.add_argument("--prompt-version", default=default,
                       help=f"shipped version (default {default}) or a path to your own template")
        m.add_argument("--limit", type=int, help="answer at most N items")
        m.add_argument("--dry-run", action="store_true",
                       help="print each request that would be sent, one JSON object a line; call nothing")
        m.add_argument("--concurrency", type=int, default=8)
        m.add_argument("--max-output-tokens", type=int, metavar="N",
                       help="room for each reply (default 2048); a reply cut off at the limit is"
                            " left unanswered: run again with a larger one")
        m.add_argument("--batch", action="store_true", help="use the provider's batch API")
        m.add_argument("--again", action="store_true",
                       help="also items this rater answered (repeated requests come from the cache)")
        m.add_argument("--dataset")
        if task in ("map", "judge"):
            what = "responses" if task == "map" else "items"
            m.add_argument("--responses-of" if task == "map" else "--items-of",
                           dest="model_filter", help=f"only the {what} of this model (every run"
                           " of it, by its name as requested, served or aliased, or a run's"
                           " label)")
            m.add_argument("--benchmark-run", dest="run_filter",
                           help=f"only the {what} of this run: its number or label (carelens"
                                " runs)")
        if task == "map":
            m.add_argument("--split")
        if task in ("judge", "extract"):
            m.add_argument("--question", help="question key or pattern, e.g. 'hb:*'")
        if task == "judge":
            m.add_argument("--answered-by", help="only what these raters answered, e.g. 'healthbench-physician:*'")

    c = sub.add_parser("collect", help="record the results of batches submitted by runs that stopped waiting")
    c.add_argument("--run", type=int, help="only this run's batch (default: every batch not collected)")
    c.add_argument("--wait", type=float, default=24 * 3600.0, metavar="SECONDS",
                   help="wait at most this long for a batch still in progress (default 24 h)")
    c.add_argument("--batch-id", help="with --run: the provider's id of a batch its run could not"
                                      " note (the run's error named it)")
    c.add_argument("--forget", action="store_true",
                   help="with --run: forget a batch the run noted but never submitted, or one the"
                        " provider no longer has (404/410: expired, deleted); its requests are"
                        " then asked again")

    q = sub.add_parser("search", help="full-text search; matches are marked «like this»")
    q.add_argument("query", help='words, "a phrase", word*, OR, -word')
    q.add_argument("--limit", type=int, default=20)
    q.add_argument("--json", action="store_true",
                   help="one JSON object a line: item_id, kind, snippet; the last line is "
                        '{"provenance": {...}}')

    a = sub.add_parser("agreement", help="agreement between two raters or groups, with intervals")
    a.add_argument("--question-set", "--question", dest="question", required=True,
                   help="question key, 'criteria', 'criteria:<codebook>', 'criteria:<codebook>@<item kind>'"
                        " (e.g. criteria:rubric@trajectory) or a pattern such as 'hb:*'")
    a.add_argument("--a", required=True, help="rater name or group:clinicians|majority|adjudicated")
    a.add_argument("--b", help="the other rater or group (leave out for a group's own agreement)")
    add_filter_options(a, AGREEMENT_FILTERS)
    a.add_argument("--by", help="break down by, e.g. category,axis,criterion")
    a.add_argument("--json", action="store_true", help="print the report as JSON")
    a.add_argument("--html", help="also write one self-contained HTML report with the plots")
    a.add_argument("--csv", help="also write the coefficient table as CSV (its provenance "
                                 "beside it, in FILE.provenance.json)")
    add_bootstrap_options(a)
    a.add_argument("--bootstrap-by", choices=("auto", "case", "unit"), default="auto",
                   help="what the bootstrap resamples: case (a case's rounds, a prefix's "
                        "responses and a prompt's completions together: they are correlated), "
                        "unit, or auto (default: cases where the data have them)")

    t = sub.add_parser("triage-metrics", help="CARE-Bench triage metrics and model ranking per label source")
    add_filter_options(t, TRIAGE_FILTERS)
    t.add_argument("--rank-by", default="macro_f1", choices=METRIC_KEYS, metavar="METRIC",
                   help=f"the metric models are ranked by: {', '.join(METRIC_KEYS)} (default macro_f1)")
    t.add_argument("--common", action="store_true",
                   help="score only the responses every reader labelled and every reference "
                        "covers, so a change of ranking comes from the labels alone (default: "
                        "each model on everything its reading covers, coverage beside)")
    add_bootstrap_options(t)
    t.add_argument("--json", action="store_true")

    sub.add_parser("verify", help="check that the record is whole: protections in place, hash"
                                  " chains unbroken (exit 1 on any problem)")
    b = sub.add_parser("backup", help="a consistent, verified copy of the database, made while"
                                      " the app serves")
    b.add_argument("--out", required=True, help="the backup file to write (must not exist)")


    add_ppi_commands(sub)


    h = sub.add_parser("healthbench-score",
                       help="HealthBench scores as simple-evals computes them, for every rater "
                            "that graded (the grader, each physician, each clinician)")
    add_filter_options(h, ("dataset", "split", "phase"))
    add_run_options(h, "HealthBench runs")
    h.add_argument("--pool", action="store_true",
                   help="one score per rater over every run chosen, pooled (by default one per"
                        " rater and run)")
    add_bootstrap_options(h)
    h.add_argument("--json", action="store_true",
                   help='print {"raters": [{"rater", "run", "run_id", "model", "overall",'
                        ' "examples", "by_tag", ...}], "provenance": {...}}: one entry per'
                        ' rater and run')

    s = sub.add_parser("serve", help="start the app on this database")
    s.add_argument("--port", type=int, default=8501)
    s.add_argument("--address", default="127.0.0.1")
    return p


def main(argv: list[str] | None = None) -> int:
    return terminal_safe(lambda: _main(argv))


def _main(argv: list[str] | None) -> int:
    from codebook import CodebookError
    from store.writer import InputError

    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # argparse has printed the usage and what is wrong (or --help)
        return exc.code if isinstance(exc.code, int) else 2
    try:
        if args.command not in NO_DATABASE:
            check_database(args.db, may_make=args.command in MAKE_DATABASE)
        return _run(args)
    except (InputError, CodebookError, UsageError) as exc:
        print(f"carelens: {exc}", file=sys.stderr)
        return 2
    except sqlite3.Error as exc:
        problem = database_problem(exc)
        if problem is None:
            raise
        print(f"carelens: {args.db}: {problem}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("carelens: interrupted; nothing half-written was kept", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return _reader_went_away()


def _run(args: argparse.Namespace) -> int:
    """The command, its output flushed here: a reader that went away
    (`carelens ... | head -1`) is then found inside `main`, not at exit."""
    code = COMMANDS[args.command](args)
    sys.stdout.flush()
    return code


_CONTROLS = {c: 0x2400 + c for c in range(0x20) if chr(c) not in "\n\t"}
_CONTROLS.update({0x7F: 0x2421, **{c: 0xFFFD for c in range(0x80, 0xA0)}})
_CONTROLS.update({c: 0xFFFD for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))})
TERMINAL_SAFE = str.maketrans(_CONTROLS)
"""Control characters as visible symbols (U+2400 to U+241F for C0, U+2421 for
DEL, U+FFFD for C1 and the bidirectional overrides): text from the data
printed to a terminal can then neither move the cursor, recolour, retitle or
clear the screen, nor make text read in another order than it is stored."""


class TerminalText:
    """A terminal's stdout or stderr that shows every control character the text
    printed holds as a visible symbol (`TERMINAL_SAFE`). carelens's own
    cursor movements (a progress line) go through `_control`."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text: str) -> int:
        return self.stream.write(text.translate(TERMINAL_SAFE))

    def __getattr__(self, name: str):
        return getattr(self.stream, name)


def _control(stream, sequence: str) -> None:
    """Write carelens's own terminal control sequence, as it is."""
    getattr(stream, "stream", stream).write(sequence)


def terminal_safe(run: Callable[[], int]) -> int:
    """`run()` with stdout and stderr each made a `TerminalText` when a terminal reads it."""
    saved = sys.stdout, sys.stderr
    try:
        if sys.stdout.isatty():
            sys.stdout = TerminalText(sys.stdout)
        if sys.stderr.isatty():
            sys.stderr = TerminalText(sys.stderr)
        return run()
    finally:
        sys.stdout, sys.stderr = saved


SIGPIPE_STATUS = 141
"""Exit status when the reader of our output went away: 128 + SIGPIPE (13), what
a shell reports for a program ended by a closed pipe (`yes | head -1` under
`set -o pipefail`). Not 0: the output was not all delivered, and a script that
checks the status of each command of a pipe can tell; not 1 or 2, which say
that something went wrong here."""


def _reader_went_away() -> int:
    """Leave quietly when stdout's reader has gone (the Python docs' recipe for
    SIGPIPE, "Note on SIGPIPE" in the `signal` module): point stdout at devnull so
    that the interpreter's last flush of what is still buffered does not fail again
    with a second traceback at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no file descriptor (stdout replaced in-process)
        pass
    return SIGPIPE_STATUS


if __name__ == "__main__":
    sys.exit(main())
