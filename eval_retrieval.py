"""Evaluate the retriever: `python eval_retrieval.py` syncs the index, runs the goldset, writes the report.

Goldsets (CSV/JSONL of questions with expected file and page) are scored by file and page; BEIR datasets
(`--dataset DIR`) at document level with NDCG. The same `LocalRAG.retrieve` the chat uses does the retrieval.
This script is the command line: it reads the options, opens and syncs the index, and writes the reports;
scoring and comparison live in localrag/evaluate.py, the result's shape in localrag/result.py.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence, TypeVar

import local_rag
from local_rag import LocalRAG, RAGError
from localrag import evaluate as ev
from localrag import goldset as gs
from localrag import report as eval_report
from localrag.evaluate import EvalError, metric_keys
from localrag import cli
from localrag import diagnose
from localrag import language, llm, llm_rerank, models
from localrag import query_vectors
from localrag.files import write_texts_atomic
from localrag.index import PAGE_CHUNKS, parse_chunk_size, significant_settings
from localrag.pages import PAGE_OFFSET, shown_page
from localrag.report import plural
from localrag.result import EXIT_OK, EXIT_USAGE, EvalResult, LeftOut, QuestionResult, Status

GOLDSET_PATH = "eval/goldset.csv"  # the goldset evaluated by default
GOLDSET_TEMPLATE_PATH = Path(__file__).resolve().parent / "eval" / "goldset_template.csv"  # copied to start a goldset
REPORT_PATH = "eval/baseline.txt"  # the committed plain-text report
ABLATION_REPORT_PATH = "eval/runs/ablation.txt"  # the --ablation table (per-configuration reports beside it)
VECTORSTORE_PATH = local_rag.VECTORSTORE_PATH  # the same index the retriever uses
K_VALUES = [5, 10, 20]  # cutoffs for goldsets; the deepest one is the retrieval depth
DATASET_K_VALUES = [1, 3, 5, 10, 100]  # cutoffs for BEIR datasets
USE_QUERY_INSTRUCTIONS = False  # append QUERY_ADDITIONAL_INSTRUCTIONS to each question
PAGE_TOLERANCE = gs.PAGE_TOLERANCE  # a hit may be this many pages away from the expected one
DATASET_CACHE = "eval/.cache/datasets"  # where dataset indexes are kept between runs
DATA_DIR = "eval/data"  # where --dataset NAME downloads are kept (beir/scifact -> eval/data/beir/scifact)
# The query vectors of earlier runs (localrag/query_vectors.py; --query-cache): a rerun embeds only new questions.
QUERY_VECTOR_CACHE = "eval/.cache/query_vectors.sqlite3"
# Where indexes with other index settings than the evaluated one are kept (--index-cache), one folder per docs
# folder and settings: `--chunk-size 800` builds one on first use and syncs it after, never the evaluated index.
INDEX_CACHE = "eval/.cache/indexes"
SWEEP_REPORT_PATH = "eval/runs/sweep.txt"  # the --sweep table of the default goldset and index (reports beside it)
DATASET_SEED = 0  # seed for --max-queries / --max-corpus-docs sampling
COMPARE_RESAMPLES = 10_000  # bootstrap and randomization resamples in comparisons
GENERATED_PATH = "eval/runs/goldset_generated.csv"  # where --generate writes its goldset
JUDGE_CACHE_PATH = "eval/judge_cache.json"  # the LLM judge's (and --llm's) cache of replies
SUITE_OUTPUT_DIR = "eval/suite_reports"  # where --suite writes entry reports and the summary
DATASET_REPORT_DIR = "eval/dataset_reports"  # default reports of --dataset runs, named after dataset and split
GOLDSET_REPORT_SUFFIX = ".report"  # another goldset's default report: beside it, <goldset name>.report.txt
DIAGNOSTIC_DEPTH = 100  # how deep the dense and BM25 lists are searched for stage ranks ("just outside the pool")
COMPARE_PATH = "eval/runs/baseline.compare.txt"  # the baseline's comparison with the report it replaced
RUNS_DIR = "eval/runs"  # reports of the default goldset under other settings, ablations, sweeps (git-ignored)
DETAILS_SUFFIX = ".details.md"  # the details file beside a goldset report: eval/baseline.txt -> baseline.details.md

T = TypeVar("T")


def parse_ks(text: str) -> list[int]:
    try:
        ks = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise EvalError(f"--k must be comma-separated positive integers like 5,10,20, got {text!r}") from None
    if not ks or ks[0] < 1:
        raise EvalError(f"--k must be comma-separated positive integers like 5,10,20, got {text!r}")
    return ks


def display_path(path: str | Path) -> str:
    """A path as messages and reports show it: relative to the working folder when inside it, else as given
    with the home folder written ~ (never a user's home folder in a committed report, never a bare file name)."""
    path = Path(path)
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        pass
    try:
        return "~/" + path.relative_to(Path.home()).as_posix()
    except ValueError:
        return path.as_posix()


def same_path(a: str | Path, b: str | Path) -> bool:
    """Whether two paths name the same file or folder (existing or not)."""
    return Path(a).resolve() == Path(b).resolve()


def log(args: argparse.Namespace, message: str) -> None:
    """Progress and notes on stderr, hidden by --quiet; warnings ("warning: ...") are always shown."""
    if not args.quiet or message.startswith("warning: "):
        print(message, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- configuration block

def dense_search_text(rag: LocalRAG, questions: Sequence[str]) -> str:
    """How the dense list was searched: exactly, or by the index's IVF with its recall against exact search,
    measured here on the run's questions at the candidate depth (localrag/ivf.py)."""
    from localrag import ivf

    search = rag.index.dense_search()
    if search["method"] == "exact":
        return f"exact cosine over all {rag.info.get('counts', {}).get('chunks', 0)} indexed chunks"
    k, asked = rag.candidate_k, tuple(dict.fromkeys(questions))
    # Keyed by what decides the figure (the chunks, the IVF's lists and seed, the probes, k, the questions), not
    # by the object: a suite opens many indexes in one process, and an IVF of other lists has the same chunks.
    key = (rag.index.fingerprint(), search["lists"], search["seed"], search["probes"], k, asked)
    if key not in _IVF_RECALL:  # once per index and question set, not per ablation row
        vectors = [rag.retriever.query_vector(rag.prepare_query(q)) for q in asked]
        exact = [[i for i, _ in rag.index.nearest(v, k, exact=True)] for v in vectors]
        found = [[i for i, _ in rag.index.nearest(v, k)] for v in vectors]
        _IVF_RECALL[key] = ivf.recall(exact, found)
    return (f"approximate: IVF of {search['lists']} lists, {search['probes']} probed per query (seed "
            f"{search['seed']}); recall@{k} against exact search {_IVF_RECALL[key]:.3f} over "
            f"{plural(len(asked), 'question')}")


_IVF_RECALL: dict[tuple, float] = {}  # dense_search_text's measurements in this process


def reranker_name(model: str) -> str:
    """A cross-encoder as reports name it: a local folder by display_path (no absolute path in a committed
    report), a hub name as given."""
    return display_path(model) if Path(model).is_dir() else model


def config_block(rag: LocalRAG, args: argparse.Namespace, mode: str, rerank: bool, extra: list,
                 questions: Sequence[str] = ()) -> list:
    s = rag.display_settings
    counts = rag.info.get("counts", {})
    if rerank:
        reranker = f"on ({reranker_name(rag.reranker_model)})"
    elif rag.reranker is not None:
        reranker = "off (--no-rerank for this row)"
    else:
        reranker = f"off ({rag.reranker_off_reason})" if rag.reranker_off_reason != "turned off" else \
            "off (--no-rerank)"
    profile = getattr(args, "profile", None)
    rows = [*extra,
            *([("Profile", f"{profile} ({profile_words(profile)}; flags given beside it win)")] if profile else []),
            *([("Suggested profile", suggestion)] if (suggestion := profile_suggestion(rag, args)) else []),
            ("Index", f"{rag.location if rag.chroma_url else display_path(rag.path)} ({counts.get('files', 0)} files, {counts.get('pages', 0)} pages, "
                      f"{counts.get('chunks', 0)} chunks)"),
            ("Embedding model", f"{s['embedding_model']} ({s['embedding_backend']})"),
            ("Chunking", f"{chunking_text(s)}, chunk headers {headers_text(s, bool(args.dataset))}"),
            *([("PDF loader", f"{s['pdf_loader']} (page text rules {rag.index.text_rules_summary()})")]
              if not args.dataset else []),
            *([("BM25 stemmer", s["bm25_stemmer"])] if s["bm25_stemmer"] != "none" else []),
            ("Query instructions", f"on ({rag.query_instructions!r})" if rag.query_instructions else "off"),
            ("Retrieval mode", f"{mode} ({rag.candidate_k} candidates per retriever"
                               + (f", {fusion_words(rag)})" if mode == "hybrid" else ")")),
            *([("Dense search", dense_search_text(rag, questions))] if mode != "bm25" else []),
            ("Document prior", document_prior_text(rag)),
            ("Reranker", reranker),
            ("Final order by", rag.describe_order(mode, rerank)),
            ("Ranked by", "pages (each page once, by its best chunk)" if rag.rank_by == "page" else
             "chunks (a page may appear more than once)")]
    return rows


def headers_text(settings: Mapping[str, Any], dataset: bool) -> str:
    """Whether chunks carry headers, and for PDFs whether those hold each chunk's context line."""
    if not settings["chunk_headers"]:
        return "off"
    if dataset:
        return "on"
    return "on, with context lines (title, form, period, registrant, section)" if settings.get("chunk_context") \
        else "on, without context lines"


def profile_suggestion(rag: LocalRAG, args: argparse.Namespace) -> str | None:
    """Why --profile long-pdf may serve this shelf better: its PDFs average LONG_PDF_PAGES pages or more and no
    profile was chosen; None otherwise (datasets, short documents)."""
    if getattr(args, "profile", None) or args.dataset or not rag.index.files:
        return None
    pages = sum(entry.get("pages", 0) for entry in rag.index.files.values()) / len(rag.index.files)
    if pages < local_rag.LONG_PDF_PAGES:
        return None
    return (f"long-pdf (the indexed PDFs average {pages:.0f} pages; on long filings it finds the right page more "
            f"often: README, \"Long PDFs\"; run with --profile long-pdf)")


def document_prior_text(rag: LocalRAG) -> str:
    """The document prior in the configuration block: its weight and how many files it knows, or off."""
    if rag.document_prior <= 0:
        return "off"
    known = sum(1 for entry in rag.index.files.values() if entry.get("identity"))
    return (f"{rag.document_prior:g} x how well a file's identity matches the question ({known} of "
            f"{len(rag.index.files)} files have one)")


def fusion_words(rag: LocalRAG) -> str:
    """Hybrid mode's fusion in the retrieval mode's line: 'RRF k=1' or 'convex fusion, dense weight 0.8'."""
    return f"convex fusion, dense weight {rag.dense_weight:g}" if rag.fusion == "convex" else f"RRF k={rag.rrf_k}"


def fusion_settings(rag: LocalRAG) -> dict[str, Any]:
    """Hybrid mode's fusion as JSON settings: RRF's k, or convex fusion and its dense weight."""
    if rag.fusion == "convex":
        return {"fusion": "convex", "dense_weight": rag.dense_weight}
    return {"rrf_k": rag.rrf_k}


def chunking_text(settings: Mapping[str, Any]) -> str:
    """How an index is chunked, in the configuration block's words."""
    if settings["chunk_size"] == PAGE_CHUNKS:
        return (f"whole pages (one chunk per page, no overlap; a page over {settings['page_chunk_limit']} "
                f"characters is split)")
    return f"{settings['chunk_size']} characters, overlap {settings['chunk_overlap']}"


def settings_json(rag: LocalRAG, args: argparse.Namespace, mode: str, rerank: bool) -> dict[str, Any]:
    """The configuration as machine-readable values (the JSON report's `settings`): what --compare diffs."""
    s = rag.index.settings
    index = rag.location if rag.chroma_url else display_path(rag.path)
    settings = {"index": index, "embedding_model": s["embedding_model"], "embedding_backend": s["embedding_backend"],
                "chunk_size": s["chunk_size"], "chunk_overlap": s["chunk_overlap"],
                **({"page_chunk_limit": s["page_chunk_limit"]} if "page_chunk_limit" in s else {}),
                "chunk_headers": s["chunk_headers"],
                # A setting newer than older reports appears when it differs from their old value, so a comparison
                # with them names only real changes.
                **({} if args.dataset else significant_settings({"chunk_context": s["chunk_context"],
                                                                 "pdf_loader": s["pdf_loader"]})),
                "bm25_stemmer": s["bm25_stemmer"],
                "query_instructions": rag.query_instructions, "retrieval_mode": mode,
                "candidate_k": rag.candidate_k, **(fusion_settings(rag) if mode == "hybrid" else {}),
                "rank_by": rag.rank_by, **({"document_prior": rag.document_prior} if rag.document_prior else {}),
                **({"profile": args.profile} if getattr(args, "profile", None) else {}),
                "reranker": reranker_name(rag.reranker_model) if rerank else None}
    if not args.dataset:
        settings["page_tolerance"] = args.page_tolerance
    return settings


def load_json_report(path: str | Path) -> EvalResult:
    """A JSON report written earlier (--compare, --compare-to, the previous report); EvalError if it is none."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise EvalError(f"{path} does not exist; write one with --json FILE") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise EvalError(f"{path} is not a JSON report of this tool ({exc})") from None
    if not isinstance(data, dict) or "per_query" not in data or "metrics" not in data:
        raise EvalError(f"{path} is not a JSON report of this tool (no 'metrics'/'per_query'); write one with "
                        f"--json FILE")
    try:
        return EvalResult.from_json(data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        what = f"the field {exc} is missing" if isinstance(exc, KeyError) else f"a field is malformed: {exc}"
        raise EvalError(f"{path} is not a JSON report of this tool ({what}); write one with --json FILE") from None


# ----------------------------------------------------------------------------- CLI

def build_parser() -> argparse.ArgumentParser:
    p = cli.new_parser(__doc__)
    gold = p.add_argument_group("goldset and report")
    gold.add_argument("--goldset", default=GOLDSET_PATH, help="goldset CSV (; or ,) or JSONL")
    gold.add_argument("--k", default=None, help=f"cutoffs, comma-separated (default: "
                                                f"{','.join(map(str, K_VALUES))} for goldsets, "
                                                f"{','.join(map(str, DATASET_K_VALUES))} for datasets)")
    gold.add_argument("--page-tolerance", type=int, default=PAGE_TOLERANCE,
                      help="pages a hit may lie away from the expected page")
    gold.add_argument("--report", default=None, help=f"plain-text report (default: {REPORT_PATH}, with --ablation "
                                                     f"{ABLATION_REPORT_PATH}, for the default goldset and index; "
                                                     f"another goldset or index: beside the goldset, "
                                                     f"NAME{GOLDSET_REPORT_SUFFIX}.txt; a dataset: "
                                                     f"{DATASET_REPORT_DIR}/NAME-SPLIT.txt)")
    gold.add_argument("--json", default=None, help="JSON report (default: the report path with .json)")
    gold.add_argument("--markdown", default=None, help="Markdown table for a pull request (default: none)")
    gold.add_argument("--explain", default=None, metavar="QUESTION",
                      help="print, for one question of the goldset (its text or query id) or any other question, "
                           "where the expected location ranked at each stage and the passages retrieved; no "
                           "evaluation, no report written (default: off)")
    gold.add_argument("--diagnostic-depth", type=int, default=DIAGNOSTIC_DEPTH,
                      help=f"how deep the dense and BM25 lists are searched for the stage ranks, beyond the "
                           f"candidates the later stages see; never changes the results (default: "
                           f"{DIAGNOSTIC_DEPTH})")
    gold.add_argument("--quiet", action="store_true", help="no progress bars or notes on stderr; warnings and a "
                                                           "failed status are still shown")
    idx = p.add_argument_group("index")
    idx.add_argument("--index", default=None, help=f"index folder (default: {VECTORSTORE_PATH} for goldsets, a "
                                                   f"cache folder under {DATASET_CACHE} for datasets)")
    idx.add_argument("--docs", default=None, help=f"PDF folder the index follows (default: the folder recorded in "
                                                  f"the index, else {local_rag.DOCS_PATH})")
    idx.add_argument("--chroma-url", default=local_rag.CHROMA_URL, help="http://HOST:PORT of a shared Chroma "
                                                                       "server instead of the local index folder "
                                                                       "(default: none)")
    idx.add_argument("--rebuild", action="store_true", help="rebuild the index from scratch first")
    idx.add_argument("--no-sync", action="store_true", help="do not sync the index with the docs folder (stale "
                                                            "files are listed as a warning); the only way to "
                                                            "evaluate a read-only index. An index of other "
                                                            "settings (below) is a cache and is synced anyway")
    settings = p.add_argument_group(
        "index settings", "as add_pdfs.py has them. A value other than the evaluated index's (the default index or "
        "--index; a dataset's: the defaults) evaluates an index built with it from the same docs folder, all "
        f"other settings as the evaluated index's, kept under --index-cache and synced on later runs; the "
        f"evaluated index is only read. Without --report the report's name says which were given, e.g. "
        f"{Path(REPORT_PATH).stem}.chunk_size-800.txt")
    cli.add_index_setting_flags(settings, vars(local_rag), loaders=local_rag.PDF_LOADERS, backends=local_rag.EMBEDDING_BACKENDS,
                                offline_models=local_rag.OFFLINE_EMBEDDING_MODELS)
    settings.add_argument("--index-cache", default=INDEX_CACHE,
                          help="folder of the indexes built for other settings, one per docs folder and settings")
    idx.add_argument("--no-wait", action="store_true", help="fail at once when another process is writing the "
                                                            "index, instead of waiting for it")
    idx.add_argument("--switch-folder", action="store_true", help="let the index follow --docs instead of the "
                                                                  "folder it follows now")
    idx.add_argument("--allow-empty", action="store_true", help="let a --docs folder without PDFs empty an index "
                                                                "that has files")
    ret = p.add_argument_group("retrieval")
    ret.add_argument("--mode", choices=local_rag.RETRIEVAL_MODES, default=None,
                     help=f"retrieval mode (default: the profile's, else RETRIEVAL_MODE in local_rag.py, "
                          f"{local_rag.RETRIEVAL_MODE})")
    ret.add_argument("--profile", choices=sorted(local_rag.PROFILES), default=None,
                     help="a preset of settings for one kind of shelf, PROFILES in local_rag.py: long-pdf is "
                          + profile_words("long-pdf") + "; a flag given beside it wins (default: none)")
    ret.add_argument("--no-rerank", action="store_true", help="turn the cross-encoder reranker off; without this "
                                                              "flag reranking is on when the model can be loaded")
    ret.add_argument("--rerank-model", default=None,
                     help=f"cross-encoder name or folder, or openai:MODEL to let a chat model on OPENAI_BASE_URL "
                          f"grade each candidate 0-10, its replies in the judge's cache and limited by "
                          f"--judge-max-calls; an explicit model that cannot be loaded is an error (default: "
                          f"{local_rag.RERANKER_MODEL})")
    ret.add_argument("--rank-by", choices=local_rag.RANK_UNITS, default=local_rag.RANK_BY,
                     help="what the ranked list holds once each: a page (by its best chunk; what citations and the "
                          "goldset name) or every chunk (RANK_BY in local_rag.py)")
    ret.add_argument("--rrf-k", type=int, default=None,
                     help=f"reciprocal rank fusion constant of hybrid mode: smaller values weigh the first ranks of "
                          f"each list more (default: RRF_K in local_rag.py, {local_rag.RRF_K})")
    ret.add_argument("--fusion", choices=local_rag.FUSIONS, default=None,
                     help=f"how hybrid mode joins the dense and BM25 lists: rrf (reciprocal ranks) or convex "
                          f"(min-max-normalised scores, weighted by --dense-weight) (default: FUSION in "
                          f"local_rag.py, {local_rag.FUSION})")
    ret.add_argument("--dense-weight", type=float, default=None, metavar="W",
                     help=f"convex fusion: the dense scores' weight from 0 to 1, BM25 gets 1 - W (default: "
                          f"DENSE_WEIGHT in local_rag.py, {local_rag.DENSE_WEIGHT})")
    ret.add_argument("--document-prior", type=float, default=None, metavar="W",
                     help=f"add W x how well a page's file (its name, title, form, period, registrant) matches the "
                          f"question to the page's score; 0 turns it off (default: DOCUMENT_PRIOR in "
                          f"local_rag.py, {local_rag.DOCUMENT_PRIOR})")
    cli.add_ivf_flags(ret, vars(local_rag), probes=True)
    ret.add_argument("--query-instructions", action="store_true", default=USE_QUERY_INSTRUCTIONS,
                     help="append QUERY_ADDITIONAL_INSTRUCTIONS from local_rag.py to each question")
    ret.add_argument("--query-cache", default=QUERY_VECTOR_CACHE, metavar="FILE",
                     help=f"SQLite file of the query vectors of earlier runs, by model, backend, export and exact "
                          f"query text: a rerun embeds only new or changed questions, and none loads the model "
                          f"(default: {QUERY_VECTOR_CACHE}; delete the file to clear it; --rebuild embeds every "
                          f"question again and replaces its vector)")
    ret.add_argument("--query-cache-entries", type=int, default=query_vectors.QUERY_VECTOR_CACHE_ENTRIES,
                     metavar="N", help=f"most query vectors the cache keeps; the least recently used are dropped "
                                       f"first (default: {query_vectors.QUERY_VECTOR_CACHE_ENTRIES})")
    ret.add_argument("--no-query-cache", action="store_true",
                     help="embed every question, neither reading nor writing the query vector cache (default: the "
                          "cache is used)")
    ds = p.add_argument_group("datasets", "a BEIR dataset instead of a goldset, scored by document")
    ds.add_argument("--dataset", default=None, help="BEIR folder (corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv), "
                                                    "Open RAGBench folder, or a public benchmark by name, downloaded "
                                                    "once into --data-dir: beir/scifact, beir/fiqa, beir/nfcorpus, ... "
                                                    "(the BEIR names) or open_ragbench (its pdf/arxiv subset), "
                                                    "instead of a goldset (default: none)")
    ds.add_argument("--data-dir", default=DATA_DIR, help="where named datasets are downloaded and kept")
    ds.add_argument("--level", choices=("document", "section"), default=None,
                    help="Open RAGBench only: a document is a whole paper or one of its sections (default: "
                         "document)")
    ds.add_argument("--split", default="test", help="qrels split of --dataset")
    ds.add_argument("--max-queries", type=int, default=None, help="evaluate a seeded sample of N dataset queries "
                                                                 "(default: all)")
    ds.add_argument("--max-corpus-docs", type=int, default=None,
                    help="index at most M dataset documents: all relevant ones, then seeded distractors "
                         "(default: all)")
    ds.add_argument("--seed", type=int, default=DATASET_SEED, help="seed for dataset sampling")
    ds.add_argument("--run-file", default=None, help="TREC run file of a dataset evaluation (default: none)")
    jd = p.add_argument_group("judge", "LLM judge (OpenAI-compatible: OPENAI_API_KEY and/or OPENAI_BASE_URL)")
    jd.add_argument("--judge", default=None, metavar="MODEL", help="ask MODEL which of the first --judge-k "
                                                                  "passages answer each question (default: off)")
    jd.add_argument("--judge-k", type=int, default=None, help="passages shown to the judge (default: JUDGE_K "
                                                               "in localrag/judge.py, 5)")
    jd.add_argument("--judge-max-calls", type=int, default=None, help="at most N new (uncached) judge calls in "
                                                                      "this run (default: no limit)")
    jd.add_argument("--judge-cache", default=None, help=f"judge cache file (default: {JUDGE_CACHE_PATH})")
    jd.add_argument("--judge-domain", default=None, help="field of the documents, to sharpen the prompt, e.g. "
                                                         "'option pricing' (default: JUDGE_DOMAIN, empty)")
    gl = p.add_argument_group("goldset tools", "grow and check goldsets")
    gl.add_argument("--lint", action="store_true", help="check the goldset against the index and docs folder; "
                                                        "exit 1 when anything is wrong")
    gl.add_argument("--generate", type=int, default=None, metavar="N", help="write N questions sampled from the "
                                                                            "indexed chunks (default: off)")
    gl.add_argument("--out", default=GENERATED_PATH, help="goldset written by --generate; an existing file is "
                                                          "refused unless --force")
    gl.add_argument("--force", action="store_true", help="with --generate: replace an existing --out file")
    gl.add_argument("--llm", default=None, metavar="MODEL", help="with --generate: let MODEL (OpenAI-compatible) "
                                                                 "write one natural question per chunk, cached "
                                                                 "like the judge (default: model-free questions)")
    cmp_ = p.add_argument_group("comparisons", "ablation, suites, and paired comparisons of reports")
    cmp_.add_argument("--ablation", action="store_true", help="evaluate every mode with and without reranking "
                                                               "over one index and one loaded model")
    cmp_.add_argument("--sweep", action="append", default=None, metavar="AXIS=V1,V2",
                      help=f"evaluate every combination of the given values (repeatable: a grid), one table, each "
                           f"row compared with the first by the paired test; rows with equal index settings share "
                           f"one index and one set of query vectors. Axes: {', '.join(SWEEP_AXES)}; e.g. "
                           f"chunk_size=2000,500,page or rerank=off,on (default: none)")
    cmp_.add_argument("--compare", nargs=2, metavar=("OLD.json", "NEW.json"), default=None,
                      help="compare two JSON reports and exit (default: off)")
    cmp_.add_argument("--compare-to", default=None, help="JSON report to compare this run with (default: the "
                                                         "previous JSON report at the output path, if any)")
    cmp_.add_argument("--no-compare", action="store_true", help="do not compare with the previous report")
    cmp_.add_argument("--intersect", action="store_true", help="compare runs over different question sets on "
                                                               "their common questions")
    cmp_.add_argument("--resamples", type=int, default=COMPARE_RESAMPLES, help="bootstrap/permutation resamples")
    cmp_.add_argument("--suite", default=None, metavar="FILE", help="run every [[entry]] of a TOML suite file "
                                                                    "(e.g. eval/suite.toml) and write a summary table "
                                                                    "(default: off)")
    cmp_.add_argument("--output-name", default=None, help="suffix of the suite's report names, for before/after "
                                                          "comparisons (default: none)")
    gate = p.add_argument_group("gates", "for CI (exit 0: evaluated and every gate passed; 1: evaluated, report "
                                         "written, but a gate failed or the run is degraded; 2: usage or input "
                                         "error, nothing evaluated)")
    gate.add_argument("--fail-under", action="append", default=None, metavar="METRIC=VALUE",
                      help="exit 1 when METRIC (a key of the JSON report's metrics, e.g. hit@5 or mrr) is under "
                           "VALUE; repeatable (default: none)")
    gate.add_argument("--fail-on-regression", action="store_true",
                      help="exit 1 when a metric is 'worse' than the compared report (--compare-to, else the "
                           "previous report) by the paired significance test, or when there is none to compare "
                           "with")
    return p


PROFILE_OPTIONS = {"retrieval_mode": "mode"}  # LocalRAG argument -> option name, where the two differ


def profile_words(name: str) -> str:
    """A profile's settings as 'chunk_size page, mode hybrid, ...' (option names)."""
    return ", ".join(f"{PROFILE_OPTIONS.get(key, key)} {format_setting(value)}"
                     for key, value in local_rag.PROFILES[name].items())


def apply_profile(args: argparse.Namespace) -> None:
    """Fill the options the command line (its flags and --sweep axes) left out from --profile's preset, then the
    mode's default; the filled option names are kept in `args.profile_keys` (report names then say the profile,
    not each setting)."""
    args.profile_keys = set()
    swept = {text.partition("=")[0].strip() for text in getattr(args, "sweep", None) or []}
    for key, value in local_rag.PROFILES.get(getattr(args, "profile", None) or "", {}).items():
        option = PROFILE_OPTIONS.get(key, key)
        if getattr(args, option, None) is None and option not in swept:
            setattr(args, option, value)
            args.profile_keys.add(option)
    if args.mode is None:
        args.mode = local_rag.RETRIEVAL_MODE


def resolve_args(args: argparse.Namespace) -> argparse.Namespace:
    apply_profile(args)
    if args.level and not args.dataset:
        raise EvalError("--level works with --dataset (Open RAGBench, e.g. --dataset open_ragbench); drop it")
    args.k_values = parse_ks(args.k) if args.k else (DATASET_K_VALUES if args.dataset else K_VALUES)
    if args.chunk_size is not None and not isinstance(args.chunk_size, int):
        try:
            args.chunk_size = parse_chunk_size(args.chunk_size)
        except ValueError as exc:
            raise EvalError(f"--chunk-size {exc}") from None
    check_sweep(args)
    if args.ablation or args.sweep_axes:  # the ablation and sweep tables always show Hit@1/3/5
        args.k_values = sorted(set(args.k_values) | {1, 3, 5})
    args.page_offset = PAGE_OFFSET
    for flag, value in (("--page-tolerance", args.page_tolerance), ("--ivf-lists", args.ivf_lists),
                        ("--ivf-probes", args.ivf_probes)):
        if value is not None and value < 0:
            raise EvalError(f"{flag} must be 0 or more, got {value}")
    # Checked before any index is opened: beir_data and retrieval_metrics would raise a bare ValueError later.
    for flag, value in (("--max-queries", args.max_queries), ("--max-corpus-docs", args.max_corpus_docs),
                        ("--judge-k", args.judge_k), ("--resamples", args.resamples),
                        ("--diagnostic-depth", args.diagnostic_depth), ("--rrf-k", args.rrf_k),
                        ("--ivf-min-chunks", args.ivf_min_chunks),
                        ("--query-cache-entries", args.query_cache_entries)):
        if value is not None and value < 1:
            raise EvalError(f"{flag} must be 1 or more, got {value}")
    if args.dense_weight is not None and not 0 <= args.dense_weight <= 1:
        raise EvalError(f"--dense-weight must be a number from 0 to 1, got {args.dense_weight:g}")
    if args.document_prior is not None and not args.document_prior >= 0:
        raise EvalError(f"--document-prior must be 0 (off) or more, got {args.document_prior:g}")
    if args.sweep_axes and (args.ablation or args.lint or args.generate is not None or args.compare or args.suite):
        other = next(flag for flag, on in (("--ablation", args.ablation), ("--lint", args.lint),
                                           ("--generate", args.generate is not None), ("--compare", args.compare),
                                           ("--suite", args.suite)) if on)
        raise EvalError(f"--sweep and {other} cannot be combined; for --ablation's rows sweep "
                        f"mode={','.join(local_rag.RETRIEVAL_MODES)} and rerank=off,on" if other == "--ablation" else
                        f"--sweep and {other} cannot be combined; run them one at a time")
    actions = [flag for flag, on in (("--dataset", args.dataset), ("--lint", args.lint),
                                     ("--generate", args.generate is not None), ("--suite", args.suite),
                                     ("--compare", args.compare), ("--explain", args.explain is not None),
                                     ("--ablation", args.ablation and args.explain is not None),
                                     ("--judge", args.judge and args.explain is not None)) if on]
    if len(actions) > 1:
        raise EvalError(f"{' and '.join(actions)} cannot be combined; run them one at a time")
    if args.explain is not None and not args.explain.strip():
        raise EvalError("--explain needs a question or a query id of the goldset, got an empty text")
    if args.llm and args.generate is None:
        raise EvalError("--llm only works with --generate N; for judging retrieved passages use --judge MODEL")
    if args.dataset:  # after the cheap checks: a name is downloaded once, then it is a BEIR folder like a path
        args.dataset = str(resolve_dataset(args))
    check_gate_flags(args)
    args.settings_base_json = None  # the JSON report a run of other settings is first compared with
    args.compare_file = None  # where the committed baseline's comparison goes instead of into the baseline
    if args.report is None:
        args.report = default_report_path(args)
        if args.report == REPORT_PATH and not (args.ablation or args.sweep_axes):
            args.compare_file = COMPARE_PATH
        if run_suffix(args) and args.json is None:
            # Other index settings: the same retrieval settings on the evaluated index; else the default run's.
            base = retrieval_suffix(args) if settings_suffix(args) else ""
            args.settings_base_json = str(Path(default_report_path(args, suffix=base)).with_suffix(".json"))
    if args.json is None:
        args.json = str(Path(args.report).with_suffix(".json"))
    if not (args.lint or args.generate is not None or args.suite or args.compare or args.explain is not None):
        check_output_paths(output_paths(args), input_paths(args), protected_folders(args))
    if args.judge:
        if args.dataset or args.ablation or args.sweep_axes:
            raise EvalError("--judge works on a goldset evaluation of one configuration; drop "
                            "--dataset/--ablation/--sweep")
        try:
            llm.check_environment(os.environ, "--judge")
        except llm.ChatError as exc:
            raise EvalError(str(exc)) from None
        if args.judge_max_calls is not None and args.judge_max_calls < 0:
            raise EvalError(f"--judge-max-calls must be 0 or more, got {args.judge_max_calls}")
    if args.no_rerank and args.rerank_model:
        raise EvalError("--no-rerank and --rerank-model contradict each other; give one of them")
    if llm_rerank.is_llm_reranker(args.rerank_model):
        try:
            llm.check_environment(os.environ, llm_rerank.FLAG)
        except llm.ChatError as exc:
            raise EvalError(str(exc)) from None
    return args


def resolve_dataset(args: argparse.Namespace) -> Path:
    """The BEIR folder of --dataset: a folder path, or a named benchmark downloaded into --data-dir."""
    from localrag import datasets as beir_data, downloads

    try:
        return downloads.resolve_dataset(args.dataset, args.data_dir, args.level, log=lambda m: log(args, m))
    except (downloads.DownloadError, beir_data.DatasetError) as exc:
        raise EvalError(str(exc)) from None


def check_gate_flags(args: argparse.Namespace) -> None:
    """Gates belong to one evaluation: parse --fail-under against this run's metric keys (before any work)."""
    gated = [flag for flag, on in (("--fail-under", args.fail_under), ("--fail-on-regression",
                                                                       args.fail_on_regression)) if on]
    other = [flag for flag, on in (("--ablation", args.ablation), ("--sweep", args.sweep), ("--lint", args.lint),
                                   ("--generate", args.generate is not None), ("--suite", args.suite),
                                   ("--compare", args.compare), ("--explain", args.explain is not None)) if on]
    if gated and other:
        raise EvalError(f"{' and '.join(gated)} gate one evaluation and do not work with {other[0]}; run the "
                        f"evaluation to gate on its own")
    if args.fail_on_regression and args.no_compare:
        raise EvalError("--fail-on-regression needs a comparison and --no-compare turns it off; drop one of them")
    args.fail_under = parse_fail_under(args.fail_under or [], metric_keys("dataset" if args.dataset else "goldset",
                                                                    args.k_values))


def is_default_setup(args: argparse.Namespace) -> bool:
    """Whether this run evaluates the default goldset on the default index (the one the committed report is of)."""
    # Without --docs the index's own folder is synced: for the default index that is DOCS_PATH.
    return (not args.dataset and same_path(args.goldset, GOLDSET_PATH)
            and (args.docs is None or same_path(args.docs, local_rag.DOCS_PATH))
            and (args.index is None or same_path(args.index, VECTORSTORE_PATH))
            and args.chroma_url == local_rag.CHROMA_URL)


def default_report_path(args: argparse.Namespace, suffix: str | None = None) -> str:
    """The report path without --report: the committed one only for the default goldset, index and settings;
    the default goldset under other index or retrieval settings, --ablation and --sweep under RUNS_DIR; another
    goldset or index gets one beside the goldset, named after it; a dataset one under DATASET_REPORT_DIR. Settings
    given as flags add themselves to the name (eval/runs/baseline.chunk_size-800.mode-dense.txt)."""
    # The settings given name the report: a run of other settings never replaces the committed baseline.
    suffix = run_suffix(args) if suffix is None else suffix
    sweep = bool(getattr(args, "sweep_axes", None))  # set by resolve_args
    if args.dataset:
        table = "-sweep" if sweep else "-ablation" if args.ablation else ""
        name = f"{Path(args.dataset).resolve().name}-{args.split}{table}{suffix}.txt"
        return str(Path(DATASET_REPORT_DIR) / name)
    if is_default_setup(args):
        if not (sweep or args.ablation or suffix):
            return REPORT_PATH
        path = Path(SWEEP_REPORT_PATH if sweep else ABLATION_REPORT_PATH if args.ablation
                    else Path(RUNS_DIR) / Path(REPORT_PATH).name)
        return str(path.with_name(path.stem + suffix + path.suffix))
    goldset = Path(args.goldset)
    table = ".sweep" if sweep else ".ablation" if args.ablation else GOLDSET_REPORT_SUFFIX
    return str(goldset.with_name(f"{goldset.stem}{table}{suffix}.txt"))


def output_paths(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(flag, path) of every file an evaluation writes."""
    details = None if args.dataset else details_path(args.report)
    return [(flag, path) for flag, path in (("--report", args.report), ("--json", args.json),
                                            ("--markdown", args.markdown), ("--run-file", args.run_file),
                                            ("the details file of --report", details),
                                            ("the comparison file", getattr(args, "compare_file", None))) if path]


def details_path(report: str | Path) -> str:
    """The details file beside a goldset report: eval/baseline.txt -> eval/baseline.details.md."""
    report = Path(report)
    return str(report.with_name(report.stem + DETAILS_SUFFIX))


def stage_cutoff(ks: Sequence[int]) -> int:
    """The cutoff of "Where the misses are lost": the first that holds the RETRIEVAL_K passages the chat
    gets, else the deepest."""
    return min((k for k in ks if k >= local_rag.RETRIEVAL_K), default=max(ks))


SQLITE_SIDE_FILES = ("-journal", "-wal", "-shm")  # files SQLite keeps beside the query vector cache
INDEX_MARKERS = ("index_info.json", "chroma.sqlite3")  # a folder holding one of these is an index folder


def input_paths(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(what, path) of every file a run reads or keeps and an output must not replace: its inputs, and the caches
    whether or not this run uses them (the judge cache is committed; the query cache holds every earlier run's
    vectors)."""
    inputs = [("--compare-to file", args.compare_to)]
    if args.dataset:
        inputs += [("--dataset file", str(Path(args.dataset) / name))
                   for name in ("corpus.jsonl", "queries.jsonl", f"qrels/{args.split}.tsv")]
    else:
        inputs.append(("--goldset file", args.goldset))
    inputs.append(("--judge-cache file", args.judge_cache or JUDGE_CACHE_PATH))
    inputs += [("--query-cache file", args.query_cache + side) for side in ("", *SQLITE_SIDE_FILES)]
    return [(what, path) for what, path in inputs if path]


def protected_folders(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(what, folder) of the folders no output may be written into: the index, the docs folder, the dataset and
    the cache of derived indexes. Any other index folder is found by check_output_paths."""
    folders = [("--index-cache folder", args.index_cache)]
    if args.dataset:
        folders.append(("--dataset folder", args.dataset))
    else:
        folders += [("index folder", args.index or VECTORSTORE_PATH),
                    ("docs folder", args.docs or (local_rag.DOCS_PATH if args.index is None else None))]
    return [(what, folder) for what, folder in folders if folder]


def index_folder_above(path: str | Path) -> Path | None:
    """The nearest folder at or above `path`'s folder that holds an index (its manifest or Chroma database)."""
    folder = Path(path).resolve().parent
    for candidate in (folder, *folder.parents):
        if any((candidate / marker).exists() for marker in INDEX_MARKERS):
            return candidate
    return None


def is_inside(path: str | Path, folder: str | Path) -> bool:
    resolved, top = Path(path).resolve(), Path(folder).resolve()
    return resolved == top or top in resolved.parents


def check_output_paths(outputs: Sequence[tuple[str, str]], inputs: Sequence[tuple[str, str]],
                       folders: Sequence[tuple[str, str]] = ()) -> None:
    """EvalError when an output would replace an input or a cache, land inside an index, docs or dataset folder,
    or replace another output of the same run."""
    for n, (flag, path) in enumerate(outputs):
        for what, other in inputs:
            if same_path(path, other):
                raise EvalError(f"{flag} {path} is the {what} {other}; writing the report there would replace it. "
                                f"Give {flag} another path")
        for what, folder in folders:
            if is_inside(path, folder):
                raise EvalError(f"{flag} {path} is inside the {what} {folder}; writing there could replace what "
                                f"it holds. Give {flag} a path outside it")
        index = index_folder_above(path)
        if index is not None:
            raise EvalError(f"{flag} {path} is inside the index folder {display_path(index)}; writing there could "
                            f"replace its manifest or store. Give {flag} a path outside it")
        for other_flag, other in outputs[n + 1:]:
            if same_path(path, other):
                raise EvalError(f"{flag} {path} and {other_flag} {other} are the same file; one would replace the "
                                f"other. Give them different paths")


def open_rag(args: argparse.Namespace, index: str | Path, settings: Mapping[str, Any] | None = None,
             cache: bool = False) -> LocalRAG:
    """The retriever of this run, holding the index's writer lock until the run ends (see `guarded`).

    No other process changes the index while it is synced and measured; a read-only index is only read.
    `settings`: the index settings asked for (INDEX_SETTINGS keys; default: the flags'); `cache`: the index is
    one of the evaluation's caches, synced even with --no-sync.
    """
    settings = requested_settings(args) if settings is None else settings
    # Without --rerank-model the reranker argument is left out: LocalRAG's default model, off when unloadable.
    reranker = {"reranker_model": None} if args.no_rerank else \
        ({"reranker_model": args.rerank_model} if args.rerank_model else {})
    if llm_rerank.is_llm_reranker(args.rerank_model):  # the judge's cache and call limit serve its grades
        reranker.update(rerank_cache=args.judge_cache or JUDGE_CACHE_PATH, rerank_max_calls=args.judge_max_calls)
    rag = LocalRAG(index, **{INDEX_SETTINGS[key]: value for key, value in settings.items()},
                   retrieval_mode=args.mode, **reranker,
                   rrf_k=local_rag.RRF_K if getattr(args, "rrf_k", None) is None else args.rrf_k,
                   rank_by=getattr(args, "rank_by", local_rag.RANK_BY),
                   fusion=getattr(args, "fusion", None) or local_rag.FUSION,
                   dense_weight=local_rag.DENSE_WEIGHT if getattr(args, "dense_weight", None) is None
                   else args.dense_weight,
                   document_prior=local_rag.DOCUMENT_PRIOR if getattr(args, "document_prior", None) is None
                   else args.document_prior,
                   ivf_min_chunks=args.ivf_min_chunks, ivf_lists=args.ivf_lists, ivf_probes=args.ivf_probes,
                   query_instructions=local_rag.QUERY_ADDITIONAL_INSTRUCTIONS if args.query_instructions else "",
                   quiet=args.quiet, chroma_url=args.chroma_url)
    exists = rag.info.get("settings") or rag.info_problem
    if cache or not args.no_sync or (exists and not rag.read_only):
        args.held.enter_context(rag.writing(wait=not args.no_wait))
    return rag


def check_docs_folder(docs: Path) -> None:
    """EvalError when the docs folder is missing or this user may not list it."""
    try:
        found = docs.is_dir()
    except OSError as exc:  # a folder above it that this user may not enter
        raise EvalError(f"docs folder {docs} cannot be read ({exc.strerror}); pass --docs FOLDER with your PDFs, or "
                        f"make it readable") from None
    if not found:
        raise EvalError(f"docs folder {docs} does not exist; pass --docs FOLDER with your PDFs")
    if not os.access(docs, os.R_OK | os.X_OK):
        raise EvalError(f"docs folder {docs} cannot be read (Permission denied); pass --docs FOLDER with your PDFs, "
                        f"or make it readable")


def sync_pdf_index(rag: LocalRAG, args: argparse.Namespace, docs: str | Path | None = None,
                   cache: bool = False) -> list[str]:
    """Sync (default) or, with --no-sync, check the index and list what is stale; returns warnings for the report.

    Without --docs the index's recorded folder is used, so evaluating another index never syncs it with
    the default folder. `docs`: the folder to sync instead; `cache`: sync even with --no-sync.
    """
    docs = Path(docs or args.docs or (rag.followed_paths or [local_rag.DOCS_PATH])[0])
    if len(rag.followed_paths) > 1 and not args.docs and not cache:
        raise EvalError(f"the index {rag.location} follows several paths ({', '.join(rag.followed_paths)}); "
                        f"pass --docs FOLDER, or sync it with add_pdfs.py and evaluate with --no-sync")
    check_docs_folder(docs)
    if args.no_sync and not cache:
        if not rag.info.get("settings") and not rag.info_problem:
            raise EvalError(f"no index at {rag.path} and --no-sync was given; run without --no-sync or run "
                            f"add_pdfs.py first")
        rag.require_consistent()
        changes = rag.pdf_changes(docs)
        stale = [f"{what}: {name}" for what in ("added", "updated", "removed") for name in changes[what]]
        stale += [f"settings: {reason}" for reason in rag.stale_reasons()]
        if stale:
            warning = (f"--no-sync: the index is stale ({len(stale)} difference{'s' if len(stale) != 1 else ''}): "
                       + "; ".join(stale))
            log(args, f"warning: {warning}")
            return [warning]
        return []
    report = rag.sync([docs], rebuild=args.rebuild, progress=not args.quiet, wait=not args.no_wait,
                      switch_folder=args.switch_folder, allow_empty=args.allow_empty)
    if cache:
        log(args, f"Index {display_path(rag.path)} ({', '.join(settings_words(rag.index.settings))}): "
                  + (report.summary() if report.changed else "up to date, nothing embedded"))
    elif report.changed:
        log(args, "Index synced: " + report.summary())
        for label, name in report.file_lines():
            log(args, f"  {label}: {name}")
        for name, why in report.repaired:
            log(args, f"  repaired: {name}: {why}")
    if suggestion := profile_suggestion(rag, args):
        log(args, f"note: suggested profile: {suggestion}")
    return ([f"Not indexed: {name}: {reason}" for name, reason in report.failed]
            + [f"Skipped: {name}: {reason}" for name, reason in report.skipped])


# ----------------------------------------------------------------------------- index settings and sweeps

# Index settings the evaluation takes, by option name (flag and sweep axis), with the index's name for each.
INDEX_SETTINGS = {"chunk_size": "chunk_size", "chunk_overlap": "chunk_overlap", "page_chunk_limit": "page_chunk_limit",
                  "loader": "pdf_loader", "chunk_headers": "chunk_headers", "chunk_context": "chunk_context",
                  "embedding_model": "embedding_model",
                  "embedding_backend": "embedding_backend", "bm25_stemmer": "bm25_stemmer"}
RETRIEVAL_AXES = ("mode", "rerank")  # sweep axes that share an index (and its query vectors) between rows
SWEEP_AXES = (*INDEX_SETTINGS, *RETRIEVAL_AXES)  # every axis --sweep knows, in the order --help lists them
ON_OFF = {"on": True, "true": True, "yes": True, "off": False, "false": False, "no": False}  # boolean axis values


def requested_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The index settings the command line gives (option name -> value), in INDEX_SETTINGS order."""
    return {key: getattr(args, key) for key in INDEX_SETTINGS if getattr(args, key, None) is not None}


def settings_words(settings: Mapping[str, Any], keys: Sequence[str] | None = None) -> list[str]:
    """Index settings as 'chunk_size 500' words, for logs (`keys`: which, default all; a setting newer than the
    manifest format only when it is on, as older indexes had it off)."""
    shown = settings if keys else significant_settings(settings)
    return [f"{key} {format_setting(shown[key])}" for key in (keys or shown) if key in shown]


def format_setting(value: Any) -> str:
    """A setting's value in messages and settings diffs: text bare, booleans on/off, None as 'none'."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return "none" if value is None else str(value)


def slug(text: str) -> str:
    """Text made safe for a file name (an embedding model 'org/name' -> 'org_name')."""
    import re

    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "_"


def settings_suffix(args: argparse.Namespace) -> str:
    """What the default report name adds for the index settings given: '.chunk_size-800.loader-pypdf'."""
    return "".join(f".{key}-{slug(format_setting(value))}" for key, value in requested_settings(args).items()
                   if key not in getattr(args, "profile_keys", ()))


def retrieval_suffix(args: argparse.Namespace) -> str:
    """What the default report name adds for retrieval and scoring settings other than the defaults:
    '.mode-dense.rerank-off.rrf_k-60'."""
    given = [("profile", getattr(args, "profile", None)),
             ("mode", args.mode if args.mode != local_rag.RETRIEVAL_MODE else None),
             ("rerank", "off" if args.no_rerank else None), ("rerank_model", args.rerank_model),
             ("rrf_k", args.rrf_k if args.rrf_k not in (None, local_rag.RRF_K) else None),
             ("fusion", args.fusion if args.fusion not in (None, local_rag.FUSION) else None),
             ("dense_weight", f"{args.dense_weight:g}" if args.dense_weight not in (None, local_rag.DENSE_WEIGHT)
              else None),
             ("document_prior", f"{args.document_prior:g}"
              if args.document_prior not in (None, local_rag.DOCUMENT_PRIOR) else None),
             ("rank_by", args.rank_by if args.rank_by != local_rag.RANK_BY else None),
             ("ivf_probes", args.ivf_probes if args.ivf_probes != local_rag.IVF_PROBES else None),
             ("ivf_min_chunks", args.ivf_min_chunks), ("ivf_lists", args.ivf_lists),
             ("k", args.k and args.k.replace(",", "_")),
             ("query_instructions", "on" if args.query_instructions != USE_QUERY_INSTRUCTIONS else None),
             ("page_tolerance", args.page_tolerance if args.page_tolerance != PAGE_TOLERANCE else None)]
    skipped = getattr(args, "profile_keys", set())
    return "".join(f".{key}-{slug(str(value))}" for key, value in given if value is not None and key not in skipped)


def run_suffix(args: argparse.Namespace) -> str:
    """The default report name's addition for every setting given: index settings, then retrieval ones."""
    return settings_suffix(args) + retrieval_suffix(args)


def parse_axis_value(axis: str, text: str) -> Any:
    """One value of a --sweep axis, checked as its flag checks it; ValueError saying what is valid."""
    text = text.strip()
    if axis == "chunk_size":
        return parse_chunk_size(text)
    if axis in ("chunk_overlap", "page_chunk_limit"):
        low = 0 if axis == "chunk_overlap" else 1
        if not text.lstrip("-").isdigit() or int(text) < low:
            raise ValueError(f"must be a whole number of characters, {low} or more, got {text!r}")
        return int(text)
    if axis in ("chunk_headers", "chunk_context", "rerank"):
        if text.lower() not in ON_OFF:
            raise ValueError(f"must be on or off, got {text!r}")
        return ON_OFF[text.lower()]
    choices = {"loader": local_rag.PDF_LOADERS, "embedding_backend": local_rag.EMBEDDING_BACKENDS,
               "mode": local_rag.RETRIEVAL_MODES}.get(axis)
    if choices is not None and text not in choices:
        raise ValueError(f"must be one of {', '.join(choices)}, got {text!r}")
    if not text:
        raise ValueError("must not be empty")
    return text


def parse_sweep(texts: Sequence[str]) -> list[tuple[str, list[Any]]]:
    """--sweep AXIS=V1,V2 flags -> [(axis, values)] in the given order; EvalError naming the valid axes."""
    axes: list[tuple[str, list[Any]]] = []
    for text in texts:
        axis, sep, values = text.partition("=")
        axis = axis.strip()
        if not sep or not axis or not values.strip():
            raise EvalError(f"--sweep needs AXIS=VALUE,VALUE like chunk_size=500,1000, got {text!r}; axes: "
                            f"{', '.join(SWEEP_AXES)}")
        if axis not in SWEEP_AXES:
            raise EvalError(f"--sweep {text}: unknown axis {axis!r}; valid axes: {', '.join(SWEEP_AXES)}")
        if any(axis == seen for seen, _ in axes):
            raise EvalError(f"--sweep names the axis {axis} twice; give all its values in one --sweep")
        parsed = []
        for part in values.split(","):
            try:
                value = parse_axis_value(axis, part)
            except ValueError as exc:
                raise EvalError(f"--sweep {text}: {axis} {exc}") from None
            if value in parsed:
                raise EvalError(f"--sweep {text}: the value {part.strip()} appears twice; give each value once")
            parsed.append(value)
        axes.append((axis, parsed))
    return axes


@dataclasses.dataclass(frozen=True)
class Row:
    """One configuration of an evaluation: its name in tables ("" without --sweep), the index settings it asks
    for (option name -> value), its retrieval mode, and reranking (None: on when the reranker loads)."""

    name: str
    index: tuple[tuple[str, Any], ...]
    mode: str
    rerank: bool | None


def evaluation_rows(args: argparse.Namespace) -> list[Row]:
    """The configurations to evaluate: the command line's one, or --sweep's grid (the first axis varies slowest,
    so the first row takes every axis's first value: the row all others are compared with)."""
    import itertools

    fixed = requested_settings(args)
    rerank = False if args.no_rerank else None
    if not args.sweep_axes:
        return [Row("", tuple(fixed.items()), args.mode, rerank)]
    rows = []
    for values in itertools.product(*(values for _, values in args.sweep_axes)):
        chosen = dict(zip((axis for axis, _ in args.sweep_axes), values))
        index = {**fixed, **{key: value for key, value in chosen.items() if key in INDEX_SETTINGS}}
        name = " ".join(f"{axis}={format_setting(value)}" for axis, value in chosen.items())
        rows.append(Row(name, tuple(index.items()), chosen.get("mode", args.mode), chosen.get("rerank", rerank)))
    return rows


def check_sweep(args: argparse.Namespace) -> None:
    """Parse --sweep into args.sweep_axes; EvalError when it contradicts another flag."""
    args.sweep_axes = parse_sweep(args.sweep or [])
    if not args.sweep_axes:
        return
    given = requested_settings(args)
    for axis, _ in args.sweep_axes:
        if axis in given:
            raise EvalError(f"--{axis.replace('_', '-')} {format_setting(given[axis])} and --sweep {axis}=... both "
                            f"set {axis}; put the value into the sweep or drop the flag")
    if args.no_rerank and any(axis == "rerank" for axis, _ in args.sweep_axes):
        raise EvalError("--no-rerank and --sweep rerank=... both set reranking; drop --no-rerank")
    if args.dataset and args.index and any(axis in INDEX_SETTINGS for axis, _ in args.sweep_axes):
        raise EvalError("--sweep over index settings needs the dataset's cached indexes (one per settings); drop "
                        "--index")


def derived_index_path(docs: str | Path, settings: Mapping[str, Any], cache: str | Path) -> Path:
    """The cache folder of an index of `settings` over `docs`: named after the folder (its name and a digest of
    its full path, so two folders named alike never share one) and a digest of the settings."""
    import hashlib

    docs = Path(docs).resolve()
    where = hashlib.sha256(str(docs).encode("utf-8")).hexdigest()[:8]
    # Caches named before a setting was recorded keep their names while it stays at its old value.
    what = hashlib.sha256(json.dumps(significant_settings(settings), sort_keys=True).encode("utf-8")).hexdigest()[:10]
    return Path(cache) / f"{docs.name}-{where}-{what}"


def resolved_index_settings(wanted: Mapping[str, Any], base: Mapping[str, Any]) -> dict[str, Any]:
    """The full index settings (the index's names) of `wanted` (option names) over the `base` index's; EvalError
    when they contradict each other (an overlap not smaller than the chunk size, ...)."""
    from localrag.index import resolve_settings

    requested = {INDEX_SETTINGS[key]: value for key, value in wanted.items()}
    defaults = {"page_chunk_limit": local_rag.PAGE_CHUNK_LIMIT, **base}
    try:
        return resolve_settings(requested, dict(base), defaults)
    except RAGError as exc:
        raise EvalError(f"index settings {', '.join(settings_words(wanted))}: {exc}") from None


def module_settings() -> dict[str, Any]:
    """The settings a new index gets (local_rag.py's constants)."""
    return {"embedding_model": local_rag.EMBEDDING_MODEL, "embedding_backend": local_rag.EMBEDDING_BACKEND,
            "chunk_size": local_rag.CHUNK_SIZE, "chunk_overlap": local_rag.CHUNK_OVERLAP,
            "pdf_loader": local_rag.PDF_LOADER, "chunk_headers": local_rag.CHUNK_HEADERS,
            "chunk_context": local_rag.CHUNK_CONTEXT, "bm25_stemmer": local_rag.BM25_STEMMER}


@dataclasses.dataclass
class OpenedIndex:
    """An index of the run, synced: its retriever, the sync's warnings for the report, and the seconds opening
    and syncing took (a build included)."""

    rag: LocalRAG
    warnings: list[str]
    seconds: float


def open_pdf_index(args: argparse.Namespace, wanted: Mapping[str, Any]) -> OpenedIndex:
    """The index a goldset run measures for the index settings `wanted` (option names), synced.

    Settings equal to the evaluated index's (the default one or --index) measure it; other settings measure an
    index built with them from the same docs folder, the rest as the evaluated index has them, kept under
    --index-cache (or, on a Chroma server, in the collection of those settings): the evaluated index is only read.
    """
    started = time.perf_counter()
    base_path = args.index or VECTORSTORE_PATH
    if not wanted:
        rag = open_rag(args, base_path, {})
        return OpenedIndex(rag, sync_pdf_index(rag, args), time.perf_counter() - started)
    probe = LocalRAG(base_path, reranker_model=None, quiet=True, chroma_url=args.chroma_url)
    # On a server the probe has the default settings: a collection is named after its settings, so other
    # settings are another collection there.
    base = {key: probe.settings[key] for key in (*module_settings(), "page_chunk_limit") if key in probe.settings}
    settings = resolved_index_settings(wanted, base)
    if settings == base:
        rag = open_rag(args, base_path, wanted)
        return OpenedIndex(rag, sync_pdf_index(rag, args), time.perf_counter() - started)
    if len(probe.followed_paths) > 1 and not args.docs:
        raise EvalError(f"the index {probe.location} follows several paths ({', '.join(probe.followed_paths)}); "
                        f"pass --docs FOLDER to say which folder the index of other settings is built from")
    docs = Path(args.docs or (probe.followed_paths or [local_rag.DOCS_PATH])[0])
    check_docs_folder(docs)
    path = base_path if args.chroma_url else derived_index_path(docs, settings, args.index_cache)
    changed = [key for key in settings if settings.get(key) != base.get(key)]
    log(args, f"Index settings {', '.join(settings_words(settings, changed))} differ from "
              f"{probe.location if args.chroma_url else display_path(base_path)}'s: evaluating "
              + ("the collection of those settings" if args.chroma_url else display_path(path))
              + " (built on first use, synced after)")
    option_names = {index_name: option for option, index_name in INDEX_SETTINGS.items()}
    rag = open_rag(args, path, {option_names[key]: value for key, value in settings.items()}, cache=True)
    return OpenedIndex(rag, sync_pdf_index(rag, args, docs=docs, cache=True), time.perf_counter() - started)


def write_outputs(result: EvalResult, args: argparse.Namespace) -> None:
    """The details file (a goldset's), the report and the JSON report; the details first, so a report never
    names a details file that is not there.

    The committed baseline carries no comparison: it would differ between the run that made it (compared
    with the report before) and the same run on a fresh clone (compared with itself). Its comparison goes to
    stdout and to COMPARE_PATH instead."""
    files: list[tuple[str, str]] = []
    block = None
    if getattr(args, "compare_file", None) and result.compare:
        block = "\n".join(eval_report.render_compare(result.compare)) + "\n"
        files.append((args.compare_file, block))
        result = dataclasses.replace(result, compare=None)
    if result.details:
        files.append((details_path(args.report), diagnose.render_details(result, display_path(args.report))))
    files += [(args.report, eval_report.render_text(result)), (args.json, eval_report.render_json(result))]
    if args.markdown:
        files.append((args.markdown, eval_report.render_markdown(result)))
    write_reports(files)
    if block is not None:
        print(block, end="")


def write_reports(files: Sequence[tuple[str, str]]) -> None:
    """Write a run's report files all or none (files.write_texts_atomic); an OSError (a full disk, a read-only
    folder) is one EvalError naming it, with every earlier report left as it was."""
    try:
        write_texts_atomic(files)
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        raise EvalError(f"the reports could not be written{where}: {exc.strerror or exc}; the reports there before "
                        f"are unchanged ({', '.join(display_path(path) for path, _ in files)}). Free some space or "
                        f"make the folder writable, then run again") from None


def previous_report(args: argparse.Namespace, identity: str,
                    query_ids: Sequence[str]) -> tuple[EvalResult | None, str, str]:
    """(report to compare with, its label, why there is none): --compare-to, else the JSON report about to be
    overwritten if it evaluated the same goldset. An explicit --compare-to over other questions (without
    --intersect) is an EvalError here, before any retrieval."""
    if args.no_compare:
        return None, "", "--no-compare was given"
    if args.compare_to:
        old = load_json_report(args.compare_to)
        ev.common_questions([q.query_id for q in old.per_query], query_ids, args.intersect)
        return old, display_path(args.compare_to), ""
    shown = display_path(args.json)
    path = Path(args.json)
    if not path.exists() and args.settings_base_json and Path(args.settings_base_json).exists():
        # The first run of other index settings: compare with the report of the evaluated index's settings.
        path = Path(args.settings_base_json)
        shown = display_path(path)
    if not path.exists():
        return None, "", f"there is no previous report at {shown}; give one with --compare-to REPORT.json"
    try:
        old = load_json_report(path)
    except EvalError as exc:
        log(args, f"warning: not comparing with the previous report: {exc}")
        return None, "", f"the previous report is unreadable: {exc}"
    if old.identity != identity:
        why = (f"the previous report {shown} is of {old.identity or 'an unknown goldset'}, this run of "
               f"{identity}; give --compare-to {shown} to compare them anyway")
        log(args, f"warning: not compared: {why}")
        return None, "", why
    return old, f"{'previous report' if path == Path(args.json) else 'report'} {shown}", ""


def print_summary(result: EvalResult, args: argparse.Namespace) -> None:
    """The metrics line on stdout, then the outcome on stderr."""
    parts = [f"{eval_report.metric_label(k)} {eval_report.fmt(v)}" for k, v in result.metrics.items()]
    print(f"{result.name}: " + ", ".join(parts) + f" ({plural(result.num_queries, 'question')})")
    print_outcome(result, args)


def print_outcome(result: EvalResult, args: argparse.Namespace) -> None:
    """The status (always when the exit code is not 0) and where the reports went, on stderr."""
    print_status(result.status, args)
    log(args, f"Report written to {display_path(args.report)} and {display_path(args.json)}")


def print_status(status: Status, args: argparse.Namespace) -> None:
    """The status lines on stderr: always when the exit code is not 0 (a failure is no progress note)."""
    if status.exit_code != EXIT_OK or not args.quiet:
        print("\n".join(eval_report.render_status(status)), file=sys.stderr, flush=True)


def evaluate(args: argparse.Namespace) -> list[EvalResult]:
    """Evaluate the goldset or dataset of `args` and write the reports: one result with its status, or with
    --ablation one per configuration (the table is printed)."""
    return run_dataset(args) if args.dataset else run_goldset(args)


def query_vector_cache(args: argparse.Namespace) -> query_vectors.QueryVectorCache | None:
    """The run's query vector cache (--query-cache), or None with --no-query-cache."""
    if args.no_query_cache:
        return None
    return query_vectors.QueryVectorCache(args.query_cache, args.query_cache_entries,
                                          warn=lambda message: log(args, f"warning: {message}"))


def fill_query_vectors(rag: LocalRAG, questions: Sequence[str], modes: Sequence[str], args: argparse.Namespace,
                       cache: query_vectors.QueryVectorCache | None) -> None:
    """Give `rag` the vector of every question before its rows run: from the query vector cache, the others
    embedded in batches and stored. Nothing when every row is BM25 only: it needs no vector, so no model loads."""
    if all(mode == "bm25" for mode in modes):
        return
    prepared = [rag.prepare_query(q) for q in questions]
    cached, embedded = query_vectors.fill(rag.retriever, cache, prepared, embed=True,
                                          batch_size=local_rag.EMBEDDING_BATCH_SIZE * 4, refresh=args.rebuild)
    if cache is not None:
        log(args, f"Query vectors: {cached} from the cache {display_path(cache.path)}, {embedded} embedded"
                  + (" (--rebuild: none read from the cache)" if args.rebuild else ""))


def run_goldset(args: argparse.Namespace) -> list[EvalResult]:
    goldset = gs.read_goldset(args.goldset, GOLDSET_TEMPLATE_PATH)
    for message in goldset.messages:
        log(args, f"warning: goldset: {message}")
    identity = "goldset " + display_path(args.goldset)
    header = [("Goldset", f"{display_path(args.goldset)} ({plural(len(goldset.questions), 'question')})")]
    rows = evaluation_rows(args)
    results: dict[int, EvalResult] = {}
    degraded: list[str] = []
    missing_rows, previous, hits, scored, shared = "", None, {}, [], None
    vector_cache = query_vector_cache(args)
    for group in index_groups(rows):
        opened = open_pdf_index(args, dict(rows[group[0]].index))
        rag, warnings = opened.rag, opened.warnings
        shared = share_query_vectors(rag, shared)
        docs = index_docs(rag)
        findings = lint_findings(rag, goldset, docs, progress=not args.quiet)
        left_out = left_out_questions(goldset.questions, docs)
        # Lint runs before every evaluation. Each finding is stated once: reader messages are already listed, and an
        # invalid page is listed under 'Left out of the metrics' with its question.
        stated = {(line, reason) for q in goldset.questions if q.query_id in left_out
                  for line in q.lines for reason in left_out[q.query_id]}
        for finding in findings:
            if finding.message.startswith("reader: ") or any((line, finding.message) in stated
                                                             for line in finding.lines):
                continue
            where = (f"line{'s' if len(finding.lines) > 1 else ''} {', '.join(map(str, finding.lines))}: "
                     if finding.lines else "")
            warnings.append(f"Goldset lint ({finding.severity}): {where}{finding.message}")
            log(args, f"warning: {warnings[-1]}")
        scored = [q for q in goldset.questions if q.query_id not in left_out]
        if not scored:
            raise EvalError(f"every question of {display_path(args.goldset)} has an invalid expected page (see the "
                            f"warnings above), so nothing can be evaluated; fix the pages and rerun")
        if previous is None:
            previous = previous_report(args, identity, [q.query_id for q in scored])
        questions = str(len(scored)) + (f" ({len(left_out)} more left out of the metrics: invalid expected "
                                        f"page)" if left_out else "")
        tail = [("Page tolerance", f"±{args.page_tolerance} (expected pages are 1-based)"), ("Questions", questions)]
        configs, why_missing = row_configs(rag, args, [(n, rows[n]) for n in group])
        missing_rows = missing_rows or why_missing
        fill_query_vectors(rag, [q.question for q in scored], [mode for _, _, mode, _ in configs], args, vector_cache)
        indexed = {d["source"]: d for d in rag.list_documents()}
        missing = ev.missing_files(scored, indexed)
        notes = [*goldset.messages, *warnings]  # a missing file is in the notes as a lint error on its line
        notes += language_note(rag, [q.question for q in goldset.questions],
                               lambda: [t for _, t, _ in rag.indexed_chunks()], "goldset")
        left_out_rows = tuple(LeftOut(q.query_id, q.question, tuple(q.lines), tuple(left_out[q.query_id]))
                              for q in goldset.questions if q.query_id in left_out)
        degraded += [reason for reason in ev.degraded_reasons(missing, sum(f.severity == "error" for f in findings),
                                                              len(left_out)) if reason not in degraded]
        setup = opened.seconds  # the first row on an index carries its opening and sync (a build included)
        for number, name, mode, rerank in configs:
            started = time.perf_counter()
            hits, traced = ev.retrieve_goldset(rag, scored, max(args.k_values), mode, rerank,
                                               progress=not args.quiet, diagnostic_depth=args.diagnostic_depth,
                                               page_offset=args.page_offset, tolerance=args.page_tolerance)
            result = ev.evaluate_goldset(scored, hits, indexed, args.k_values,
                                         name=name or ev.config_name(mode, rerank), title=identity,
                                         page_offset=args.page_offset, tolerance=args.page_tolerance,
                                         traced=traced, stage_k=stage_cutoff(args.k_values))
            results[number] = dataclasses.replace(
                result, seconds=time.perf_counter() - started + setup, goldset=identity,
                config=tuple(config_block(rag, args, mode, rerank, header, [q.question for q in scored]) + tail),
                settings=settings_json(rag, args, mode, rerank), messages=tuple(notes), left_out=left_out_rows)
            setup = 0.0
    results_list = [results[n] for n in sorted(results)]
    if args.judge:  # one configuration: --judge and --ablation/--sweep exclude each other
        results_list[0], judge_degraded = add_judge(results_list[0], hits, scored, args)
        degraded += judge_degraded
    return finish(results_list, args, previous, degraded, missing_rows)


def index_groups(rows: Sequence[Row]) -> list[list[int]]:
    """Row numbers grouped by the index settings they ask for, in order of first appearance: one index each."""
    groups: dict[tuple, list[int]] = {}
    for number, row in enumerate(rows):
        groups.setdefault(tuple(sorted(row.index, key=lambda item: item[0])), []).append(number)
    return list(groups.values())


def row_configs(rag: LocalRAG, args: argparse.Namespace,
                rows: Sequence[tuple[int, Row]]) -> tuple[list[tuple[int, str, str, bool]], str]:
    """(row number, name, mode, rerank) of the rows evaluated on `rag`, and why rows are missing ("" if none):
    --ablation's rows, or the given ones (a row asking for reranking without a reranker is missing)."""
    if args.ablation:
        configs, why = ablation_configs(rag)
        return [(n, "", mode, rerank) for n, (mode, rerank) in enumerate(configs)], why
    out = []
    for number, row in rows:
        if row.rerank and rag.reranker is None:
            continue
        out.append((number, row.name, row.mode, rag.reranker is not None if row.rerank is None else row.rerank))
    skipped = len(rows) - len(out)
    why = "" if not skipped else f"the rows with rerank=on are missing (no reranker: {rag.reranker_off_reason})"
    return out, why


def share_query_vectors(rag: LocalRAG, shared: LocalRAG | None) -> LocalRAG:
    """Let `rag` use the query vectors of an earlier index's retriever when both embed queries alike (same model,
    backend and export), so a sweep embeds each question once per embedding model; the retriever to share next."""
    if shared is not None and rag.retriever.share_query_vectors(shared.retriever):
        return shared
    return rag


def left_out_questions(questions: Sequence[gs.GoldQuestion], docs: dict[str, Any],
                       page_offset: int = PAGE_OFFSET) -> dict[str, list[str]]:
    """query_id -> why the question cannot be scored: a page the reader could not use, or one its indexed file
    does not have. Such a question is left out of the metrics, never widened to the whole file."""
    from localrag import lint as goldset_lint

    by_norm = {gs.normalize_source(name): doc for name, doc in docs.items()}
    out = {}
    for q in questions:
        reasons = [loc.problem for loc in q.locations if loc.problem]
        for loc in q.locations:
            doc = by_norm.get(gs.normalize_source(loc.source))
            problem = goldset_lint.page_range_problem(loc, doc, page_offset) if doc is not None else None
            if problem:
                reasons.append(problem)
        if reasons:
            out[q.query_id] = reasons
    return out


def add_judge(result: EvalResult, hits: Mapping[str, Sequence[ev.Hit]], questions: Sequence[gs.GoldQuestion],
              args: argparse.Namespace) -> tuple[EvalResult, list[str]]:
    """The result with the judge's verdicts on the first passages of every question, and why the judge degrades
    the run (it stopped, or returned unreadable replies)."""
    from localrag import judge

    k = args.judge_k or judge.JUDGE_K
    items = [judge.JudgeItem(q.query_id, q.question,
                             [judge.Passage(d.metadata["source"], shown_page(int(d.metadata["page"])),
                                            d.page_content) for d, _ in hits[q.query_id][:k]])
             for q in questions]
    run = judge.run_judge(items, args.judge, cache_path=args.judge_cache or JUDGE_CACHE_PATH,
                          max_new_calls=args.judge_max_calls, k=k, domain=args.judge_domain, progress=None if args.quiet else
                          (lambda message: print(message, file=sys.stderr, flush=True)),
                          warn=lambda message: print(f"warning: {message}", file=sys.stderr, flush=True),
                          flag="--judge")
    log(args, judge.judge_calls_line(run))
    messages, degraded = list(result.messages), []
    if run.cache_warning:
        messages.append(run.cache_warning)
    if run.stopped:
        print(f"warning: judging stopped: {run.stopped}", file=sys.stderr)
        messages.append(f"Judging stopped early: {run.stopped}")
        degraded.append(f"the judge stopped before every question was judged: {run.stopped}")
    if run.unreadable:
        degraded.append(f"the judge's reply was unreadable for {plural(run.unreadable, 'question')} "
                        f"(see 'LLM judge'); check that {args.judge} answers in the requested JSON")
    by_id = {q.query_id: q.question for q in questions}
    ranks = result.ranks
    summary = judge.summarize_judge(run, ranks, k)
    judged = judge.judge_to_json(summary, run.verdicts, by_id, ranks)
    return dataclasses.replace(
        result, messages=tuple(messages), config=(*result.config, ("LLM judge", f"{args.judge}, first {k} passages")),
        judge_lines=tuple(eval_report.render_judge(judged)), judge=judged), degraded


def dataset_index_path(args: argparse.Namespace, wanted: Mapping[str, Any] | None = None) -> Path:
    """Cache folder named after the dataset, its sample and the index settings (`wanted`, option names, over the
    defaults; default: the flags'): other settings never reuse it."""
    import hashlib

    from localrag import datasets as beir_data

    fingerprint = beir_data.dataset_fingerprint(args.dataset, args.split, args.max_queries, args.max_corpus_docs,
                                                args.seed)
    resolved = dataset_settings(args, wanted)
    settings = {key: resolved[key] for key in ("embedding_model", "embedding_backend", "chunk_size", "chunk_overlap",
                                               "chunk_headers", "page_chunk_limit") if key in resolved}
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:10]
    return Path(DATASET_CACHE) / f"{Path(args.dataset).resolve().name}-{fingerprint}-{digest}"


def dataset_settings(args: argparse.Namespace, wanted: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A dataset index's settings (the index's names): `wanted` (option names; default: the flags') over the
    defaults."""
    return resolved_index_settings(requested_settings(args) if wanted is None else wanted, module_settings())


def run_dataset(args: argparse.Namespace) -> list[EvalResult]:
    from localrag import datasets as beir_data

    try:
        dataset = beir_data.load_beir(args.dataset, args.split)
    except beir_data.DatasetError as exc:
        raise EvalError(str(exc)) from None
    messages = list(dataset.problem_lines())
    for message in messages:
        log(args, f"warning: dataset: {message}")
    degraded = ev.dataset_degraded_reasons(messages)
    sample_text = "all queries and documents"
    if args.max_queries or args.max_corpus_docs:
        dataset, info = beir_data.sample_dataset(dataset, args.max_queries, args.max_corpus_docs, args.seed)
        sample_text = info.describe()
        messages.append("These numbers come from a sample: " + sample_text)
    identity = f"dataset {Path(args.dataset).resolve().name} ({args.split})"
    previous = previous_report(args, identity, [q.query_id for q in ev.dataset_queries(dataset)])
    records = [{"doc_id": d.doc_id, "title": d.title, "text": d.text, "metadata": d.metadata}
               for d in dataset.documents.values()]
    name = Path(args.dataset).resolve().name
    header = [("Dataset", f"{name}, split {args.split} ({sample_text})")]
    tail = [("Scoring", "document level: chunks over-fetched, collapsed by doc_id (best chunk), cut at k"),
            ("Queries", "{queries}")]
    rows = evaluation_rows(args)
    results: dict[int, EvalResult] = {}
    missing_rows, run, shared = "", {}, None
    vector_cache = query_vector_cache(args)
    for group in index_groups(rows):
        started = time.perf_counter()
        wanted = dict(rows[group[0]].index)
        index = args.index or dataset_index_path(args, wanted)
        # All settings are passed, so a cache folder is built with exactly the settings its name stands for.
        option_names = {index_name: option for option, index_name in INDEX_SETTINGS.items()}
        rag = open_rag(args, index, wanted if args.index else
                       {option_names[key]: value for key, value in dataset_settings(args, wanted).items()})
        report = rag.sync_records(records, rebuild=args.rebuild, progress=not args.quiet)
        if report.changed:
            log(args, "Dataset index synced: " + report.summary())
        messages += [note for note in language_note(rag, [q.question for q in dataset.queries.values()],
                                                    lambda: [r["text"] for r in records], "queries")
                     if note not in messages]
        shared = share_query_vectors(rag, shared)
        configs, why_missing = row_configs(rag, args, [(n, rows[n]) for n in group])
        missing_rows = missing_rows or why_missing
        fill_query_vectors(rag, [q.question for q in ev.dataset_queries(dataset)], [mode for _, _, mode, _ in configs],
                           args, vector_cache)
        setup = time.perf_counter() - started
        for number, row_name, mode, rerank in configs:
            started = time.perf_counter()
            run, stages = ev.retrieve_dataset(rag, dataset, max(args.k_values), mode, rerank,
                                              progress=not args.quiet, diagnostic_depth=args.diagnostic_depth)
            result = ev.evaluate_dataset(dataset, run, args.k_values, name=row_name or ev.config_name(mode, rerank),
                                         title=identity, stages=stages, stage_k=stage_cutoff(args.k_values))
            config = config_block(rag, args, mode, rerank, header,
                                  [q.question for q in ev.dataset_queries(dataset)]) + [
                (label, value.format(queries=result.num_queries)) for label, value in tail]
            results[number] = dataclasses.replace(result, seconds=time.perf_counter() - started + setup,
                                                  goldset=identity, config=tuple(config),
                                                  settings=settings_json(rag, args, mode, rerank),
                                                  messages=(*messages, *result.messages))
            setup = 0.0
    return finish([results[n] for n in sorted(results)], args, previous, degraded, missing_rows, run=run)


def language_note(rag: LocalRAG, questions: Sequence[str], indexed: Callable[[], Sequence[str]],
                  what: str) -> list[str]:
    """The note that the embedding model does not cover the language of the questions or the text (or none).

    `indexed` gives the indexed texts; it reads the whole store, so it is called only for an English-only model."""
    model = rag.display_settings["embedding_model"]
    if not models.english_only(model):
        return []
    hint = language.language_hint(model, questions, indexed(), what)
    return [hint] if hint else []


def ablation_configs(rag: LocalRAG) -> tuple[list[tuple[str, bool]], str]:
    """The (mode, rerank) rows of --ablation, and why the reranked rows are missing ("" if they are not)."""
    if rag.reranker is not None:
        return [(mode, rerank) for mode in local_rag.RETRIEVAL_MODES for rerank in (False, True)], ""
    why = "--no-rerank was given" if rag.reranker_off_reason == "turned off" else \
        f"no reranker: {rag.reranker_off_reason}"
    return [(mode, False) for mode in local_rag.RETRIEVAL_MODES], f"every '+ rerank' row is missing ({why})"


def finish(results: list[EvalResult], args: argparse.Namespace, previous: tuple[EvalResult | None, str, str],
           degraded: Sequence[str], missing_rows: str = "",
           run: Mapping[str, dict[str, float]] | None = None) -> list[EvalResult]:
    """Compare, check the gates, write the reports (and the --run-file of a dataset `run`); the results with
    their status."""
    generated = time.strftime("%Y-%m-%d %H:%M:%S")
    results = [dataclasses.replace(r, generated=generated) for r in results]
    if not results:  # a sweep whose every row asked for a reranker that could not be loaded
        raise EvalError(f"no row of the sweep could be evaluated: {missing_rows}")
    if not args.dataset:  # a goldset's questions not at rank 1 get their passages in the details file
        results = [dataclasses.replace(r, details=display_path(details_path(args.report))) for r in results]
    if args.sweep_axes:
        return write_sweep(results, args, degraded, missing_rows)
    if len(results) > 1:
        return write_ablation(results, args, degraded, missing_rows)
    result = results[0]
    old, label, why_not = previous
    if old is not None:
        # The previous report at the output path is overwritten now, so "rerun with --intersect" would compare
        # the run with itself: compare the common questions, or say why there is no comparison.
        implicit = not args.compare_to
        try:
            result = dataclasses.replace(result, compare=ev.compare_results(
                old, result, args.intersect or implicit, label, resamples=args.resamples))
        except EvalError as exc:
            if not implicit:
                raise
            why_not = f"not compared with the {label}: {exc}"
            log(args, f"warning: {why_not}")
            result = dataclasses.replace(result, messages=(*result.messages, why_not[0].upper() + why_not[1:]))
    failed = ev.gate_failures(result.metrics, args.fail_under, args.fail_on_regression, result.compare, why_not)
    result = dataclasses.replace(result, status=ev.run_status(degraded, failed, gate_descriptions(args)))
    write_outputs(result, args)
    if args.run_file and run is not None:
        from localrag import datasets as beir_data

        try:
            beir_data.write_trec_run(args.run_file, run, tag=f"localrag-{result.name.replace(' ', '')}")
        except beir_data.RunFormatError as exc:
            raise EvalError(f"--run-file {args.run_file} not written (the reports are): {exc}") from None
    return [result]


def parse_fail_under(texts: Sequence[str], valid: Sequence[str]) -> list[tuple[str, float]]:
    """--fail-under METRIC=VALUE flags -> [(metric key, threshold)]; EvalError naming the valid keys."""
    gates = []
    for text in texts:
        key, sep, value = text.partition("=")
        key = key.strip().lower()
        if not sep or not key:
            raise EvalError(f"--fail-under needs METRIC=VALUE like hit@5=0.8, got {text!r}")
        try:
            threshold = float(value)
        except ValueError:
            raise EvalError(f"--fail-under {text}: {value.strip()!r} is not a number; write a value between 0 and 1 "
                            f"like hit@5=0.8") from None
        if not 0 <= threshold <= 1:
            raise EvalError(f"--fail-under {text}: {threshold:g} lies outside 0..1, the range of every metric")
        if key not in valid:
            raise EvalError(f"--fail-under {text}: this run reports no metric {key!r}; valid keys: "
                            f"{', '.join(valid)} (the cutoffs follow --k)")
        gates.append((key, threshold))
    return gates


def gate_descriptions(args: argparse.Namespace) -> list[str]:
    """The gates of this run as the status line names them."""
    gates = [f"{key} >= {threshold:g}" for key, threshold in args.fail_under]
    return gates + (["no metric worse than the compared report"] if args.fail_on_regression else [])

def write_row_reports(results: Sequence[EvalResult], reports: Sequence[Path]) -> None:
    """Each configuration's own report (text and JSON) at its path, with its details file first when it has one."""
    files = []
    for r, report in zip(results, reports):
        if r.details:
            r = dataclasses.replace(r, details=display_path(details_path(report)))
            files.append((details_path(report), diagnose.render_details(r, display_path(report))))
        files += [(str(report), eval_report.render_text(r)), (str(report.with_suffix(".json")),
                                                               eval_report.render_json(r))]
    write_reports(files)


def write_table(table_text: str, results: Sequence[EvalResult], path: Path, args: argparse.Namespace) -> None:
    """An --ablation or --sweep table: written to `path` (and --markdown), printed, with the run's status."""
    files = [(str(path), table_text)]
    if args.markdown:
        rows, keys = eval_report.ablation_table(results)
        files.append((args.markdown, "\n".join(eval_report.render_table(rows, keys, markdown=True,
                                                                        extra=["seconds"])) + "\n"))
    write_reports(files)
    print(table_text, end="")
    print_status(results[0].status, args)


def write_ablation(results: list[EvalResult], args: argparse.Namespace, degraded: Sequence[str],
                   missing_rows: str = "") -> list[EvalResult]:
    """One table over all configurations (written and printed) plus one report per configuration beside it."""
    results = [dataclasses.replace(r, status=ev.run_status(degraded, [], [])) for r in results]
    base = Path(args.report)
    write_row_reports(results, [base.with_name(f"{base.stem}-{r.name.replace(' + ', '-')}.txt") for r in results])
    table_text = eval_report.render_ablation(results, missing_rows,
                                             display_path(base.with_name(base.stem + "-<configuration>.txt")))
    write_table(table_text, results, base, args)
    log(args, f"Ablation: {len(results)} configurations in {sum(r.seconds for r in results):.1f} s of retrieval")
    return results


def write_sweep(results: list[EvalResult], args: argparse.Namespace, degraded: Sequence[str],
                missing_rows: str = "") -> list[EvalResult]:
    """The sweep table (written and printed), each row compared with the first by the paired test, plus one
    report per row beside it (its comparison with the first row included)."""
    first = results[0]
    label = f"first row ({first.name})"
    results = [dataclasses.replace(r, status=ev.run_status(degraded, [], []), compare=None if n == 0 else
                                   ev.compare_results(first, r, True, label, resamples=args.resamples))
               for n, r in enumerate(results)]
    base = Path(args.report)
    write_row_reports(results, [base.with_name(f"{base.stem}-{slug(r.name.replace('=', '-').replace(' ', '.'))}.txt")
                                for r in results])
    axes = [(axis, [format_setting(v) for v in values]) for axis, values in args.sweep_axes]
    table_text = eval_report.render_sweep(results, axes, missing_rows,
                                          display_path(base.with_name(base.stem + "-<row>.txt")))
    write_table(table_text, results, base, args)
    log(args, f"Sweep: {len(results)} configurations in {sum(r.seconds for r in results):.1f} s; table written to "
              f"{display_path(base)}")
    return results


def index_docs(rag: LocalRAG) -> dict[str, Any]:
    """Indexed file -> DocInfo (page count, 0-based pages without text)."""
    from localrag import lint as goldset_lint

    return {d["source"]: goldset_lint.DocInfo(d["pages"], frozenset(d["empty_pages"])) for d in rag.list_documents()}


def lint_findings(rag: LocalRAG, goldset: gs.Goldset, docs: dict[str, Any], progress: bool = False) -> list:
    """Lint findings of a read goldset against the index: files (also those that failed to index), pages, text."""
    from localrag import lint as goldset_lint

    unindexed = {name: entry["reason"] for name, entry in rag.info.get("failed", {}).items()}
    return goldset_lint.lint_goldset(goldset.questions, goldset.messages, docs, page_offset=PAGE_OFFSET,
                                     unindexed=unindexed, progress=progress)


def run_lint(args: argparse.Namespace) -> int:
    """Check the goldset against the synced index: exit 1 when there is any finding, error or warning."""
    from localrag import lint as goldset_lint

    goldset = gs.read_goldset(args.goldset, GOLDSET_TEMPLATE_PATH)
    rag = open_pdf_index(args, requested_settings(args)).rag
    findings = lint_findings(rag, goldset, index_docs(rag), progress=not args.quiet)
    print("\n".join(goldset_lint.render_lint(findings)))
    # Warnings too: a short question or a near-duplicate with other locations is wrong, only less harmful.
    return 1 if findings else 0


def run_generate(args: argparse.Namespace) -> int:
    """Sample chunks from the index and write a goldset of generated questions; 1 if the model stopped early."""
    from localrag import generate as gen

    if args.generate < 1:
        raise EvalError(f"--generate needs a positive number of questions, got {args.generate}")
    out = Path(args.out)
    # Checked before the index is synced and the model asked, which may take long.
    check_output_paths([("--out", args.out)], input_paths(args), protected_folders(args))  # --force or not
    if out.is_dir() or not out.parent.is_dir():
        raise EvalError(f"--out {args.out}: {'is a folder' if out.is_dir() else f'folder {out.parent} does not exist'}"
                        f"; give the path of a .csv file in an existing folder")
    if out.exists() and not args.force:
        raise EvalError(f"--out {args.out} already exists; pass --force to replace it, or choose another --out")
    ask, stopped = llm_question_asker(args) if args.llm else (None, lambda: None)
    rag = open_pdf_index(args, requested_settings(args)).rag
    chunks = [{"chunk_id": i, "source": m["source"], "page": int(m["page"]), "text": t}
              for i, t, m in rag.indexed_chunks()]
    if not chunks:
        raise EvalError(f"the index at {rag.location} holds no chunks; index PDFs first (add_pdfs.py)")
    result = gen.generate_questions(chunks, args.generate, args.seed, ask=ask, llm_name=args.llm)
    print("\n".join(gen.render_generation_summary(result)))
    if not result.rows:
        raise EvalError(f"no question was generated, so {display_path(args.out)} was not written; see the summary "
                        f"above")
    try:
        gs.write_goldset_csv(out, result.rows)
    except OSError as exc:
        raise EvalError(f"--out {args.out} could not be written ({exc}); choose another --out") from None
    made = len(result.rows)
    print(f"Wrote {made} question{'s' if made != 1 else ''} to {display_path(args.out)}")
    if stopped():
        print(f"error: the model stopped before the goldset was complete: {stopped()}; rerun when it answers "
              f"again (answered chunks are cached)", file=sys.stderr)
        return 1
    return 0


def llm_question_asker(args: argparse.Namespace) -> tuple[Any, Any]:
    """(ask, stopped): ask(prompt) -> reply text or None through the cached, retrying client and the judge's cache;
    stopped() -> why the model stopped answering (server down, refused), or None.

    Replies with a question and explicit declines are cached; an unreadable reply is not, so the next run asks again.
    """
    import os

    from localrag import generate as gen
    from localrag import judge, llm

    flag = f"--llm {args.llm}"
    try:
        llm.check_environment(os.environ, flag)
    except llm.ChatError as exc:
        raise EvalError(str(exc)) from None
    cache, cache_warning = judge.open_cache(args.judge_cache or JUDGE_CACHE_PATH)
    if cache_warning:
        print(f"warning: {cache_warning}", file=sys.stderr)
    # The judge's server and cache (--judge-cache) serve the questions too, so messages name the judge.
    client = llm.CachedChat(args.llm, cache, who="judge", flag=flag, progress=None if args.quiet else
                            (lambda message: print(message, file=sys.stderr, flush=True)))
    stops: list[str] = []

    def readable(text: str) -> dict:
        if gen.parse_llm_reply(text)[0] == "failed":
            raise llm.UnreadableReply(f"no question in reply {text[:80]!r}")
        return {"reply": text}

    def ask(prompt: str) -> str | None:
        try:
            entry, _ = client.ask(prompt, parse=readable, meta={"kind": "generate"},
                                  is_valid=lambda e: isinstance(e.get("reply"), str))
        except llm.UnreadableReply:
            return None
        except (llm.ChatError, llm.CallLimitReached) as exc:
            if not stops:  # every later prompt fails the same way; say it once
                stops.append(str(exc))
                print(f"warning: question generation stopped: {exc}", file=sys.stderr, flush=True)
            return None
        return entry["reply"]

    return ask, lambda: stops[0] if stops else None


def run_compare(args: argparse.Namespace) -> int:
    old_path, new_path = args.compare
    old, new = load_json_report(old_path), load_json_report(new_path)
    compare = ev.compare_results(old, new, args.intersect, display_path(old_path), resamples=args.resamples)
    print(f"{display_path(new_path)} vs. {display_path(old_path)}")
    print("\n".join(eval_report.render_compare(compare)))
    return 0


def run_explain(args: argparse.Namespace) -> int:
    """Print the details block of one question (of the goldset, by text or query id, or any other question)
    for the configuration of `args`: nothing is evaluated or written."""
    wanted = " ".join(args.explain.split())
    explicit_goldset = not same_path(args.goldset, GOLDSET_PATH)
    questions = gs.read_goldset(args.goldset, GOLDSET_TEMPLATE_PATH).questions \
        if explicit_goldset or Path(args.goldset).exists() else []
    question = next((q for q in questions if q.query_id == wanted), None) or next(
        (q for q in questions if " ".join(q.question.split()).casefold() == wanted.casefold()), None)
    rag = open_rag(args, args.index or VECTORSTORE_PATH)
    sync_pdf_index(rag, args)
    rerank = rag.reranker is not None
    text = question.question if question else wanted
    if args.mode != "bm25":  # a cached vector spares loading the model; a new one is embedded, not stored
        query_vectors.fill(rag.retriever, query_vector_cache(args), [rag.prepare_query(text)], embed=False,
                           batch_size=1)
    trace = rag.retrieve_traced(text, k=max(args.k_values), mode=args.mode, rerank=rerank,
                                depth=args.diagnostic_depth)
    k = stage_cutoff(args.k_values)
    if question is not None:
        traced = ev.trace_goldset(trace, question.locations, args.page_offset, args.page_tolerance)
        entry = QuestionResult(question.query_id, text, traced.stages.ranks["final"], {}, question.corpus or "",
                               tuple(ev.location_json(loc) for loc in question.locations))
        entry = ev.diagnosed(entry, trace.final, traced, k, args.page_offset, always=True)
    else:
        entry = QuestionResult("", text, None, {}, passages=tuple(ev.passage(hit, rank, text, args.page_offset)
                                                          for rank, hit in enumerate(trace.final[:k], 1)))
    lists = {name: [diagnose.passage_where(ev.passage(hit, rank, text, args.page_offset))
                    for rank, hit in enumerate(hits[:diagnose.STAGE_LIST_SHOWN], 1)]
             for name, hits in ev.stage_lists(trace).items()}
    print(f"{rag.location if rag.chroma_url else display_path(rag.path)}: {rag.describe_order(args.mode, rerank)}, "
          f"{args.mode} mode, {rag.candidate_k} candidates per retriever, lists searched {args.diagnostic_depth} "
          f"deep" + ("" if question else f"; not a question or query id of {display_path(args.goldset)}"))
    print()
    block = "\n".join(diagnose.render_question_block(entry, k, lists, in_goldset=question is not None)).rstrip()
    print(diagnose.unescape_markdown(block))  # read on a terminal, not rendered: no Markdown escapes
    return EXIT_OK


def run_suite(args: argparse.Namespace) -> int:
    """Every entry of the --suite file evaluated in this process, then the summary table; 1 if any failed."""
    from localrag import suite as eval_suite

    try:
        return eval_suite.run_suite(args.suite, args.output_name,
                                    lambda options, report: run_suite_entry(options, report, args),
                                    output_dir=SUITE_OUTPUT_DIR)
    except eval_suite.SuiteError as exc:
        raise EvalError(str(exc)) from None


def run_suite_entry(options: Mapping[str, Any], report: Path,
                    suite_args: argparse.Namespace) -> EvalResult | list[EvalResult] | None:
    """One suite entry: its options read as on the command line (plus --quiet, --rebuild and --no-sync of the
    suite's command line), reports at `report`: its result, a sweep's results (one per row), or None, with the
    reason on stderr, when it evaluated nothing."""
    try:
        args = build_parser().parse_args(option_flags(options))
    except SystemExit:  # argparse printed why (an unknown key, a bad value); the other entries still run
        return None
    args.report, args.json = str(report), str(report.with_suffix(".json"))
    for flag in ("quiet", "rebuild", "no_sync"):
        setattr(args, flag, getattr(args, flag) or getattr(suite_args, flag))
    results, _ = guarded(args, evaluate)
    if results is None:
        return None
    if args.sweep_axes:  # the table was printed
        return results
    print_outcome(results[0], args)
    return results[0]


def option_flags(options: Mapping[str, Any]) -> list[str]:
    """Suite entry options as command-line flags: `key = true` is --key, false leaves it out, a list is joined
    with commas (`k = [5, 10]` is --k 5,10), except for a repeatable flag, which is repeated
    (`sweep = ["chunk_size=500,1000", "mode=dense,hybrid"]`)."""
    repeatable = {action.dest for action in build_parser()._actions if isinstance(action, argparse._AppendAction)}
    flags: list[str] = []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            flags.append(flag)
        elif isinstance(value, list) and key in repeatable:
            for item in value:
                flags += [flag, str(item)]
        elif isinstance(value, list):
            flags += [flag, ",".join(str(v) for v in value)]
        elif value is not False:
            flags += [flag, str(value)]
    return flags


def run_command(args: argparse.Namespace) -> int:
    """Run what the resolved options ask for; the exit code."""
    if args.compare:
        return run_compare(args)
    if args.suite:
        return run_suite(args)
    if args.lint:
        return run_lint(args)
    if args.generate is not None:
        return run_generate(args)
    if args.explain is not None:
        return run_explain(args)
    results = evaluate(args)
    if len(results) == 1 and not args.sweep_axes:  # an ablation or a sweep printed its table
        print_summary(results[0], args)
    return results[0].status.exit_code


def guarded(args: argparse.Namespace, run: Callable[[argparse.Namespace], T]) -> tuple[T | None, int]:
    """(run(resolved args), EXIT_OK), or (None, exit code) with the error on stderr. Index locks taken by
    open_rag are held until run returns."""
    with contextlib.ExitStack() as args.held:
        try:
            return run(resolve_args(args)), EXIT_OK
        except (EvalError, gs.GoldsetError, RAGError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return None, EXIT_USAGE
        except KeyboardInterrupt:
            print("interrupted: reports already written are unchanged", file=sys.stderr)
            return None, 130


def main(argv: Sequence[str] | None = None) -> int:
    code, failure = guarded(build_parser().parse_args(argv), run_command)
    return failure if code is None else code


if __name__ == "__main__":
    sys.exit(main())
