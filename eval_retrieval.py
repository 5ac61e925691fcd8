"""Evaluate the retriever: `python eval_retrieval.py` syncs the index, runs the goldset, writes the report.

Goldsets (CSV/JSONL of questions with expected file and page) are scored by file and page; BEIR datasets
(`--dataset DIR`) at document level with NDCG. The same `LocalRAG.retrieve` the chat uses does the retrieval.
This script holds the settings, the command line and the story of a run: check the options, plan the rows,
open and sync each row's index, retrieve and score, write the reports, apply the gates. Each step lives in the
package's runs/ folder: options.py (parse once, check once), plan.py, indexes.py, rows.py (scoring in
evaluation/scoring.py), outputs.py (where every report goes).
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import sys
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence, TypeVar

import local_rag
from local_rag import LocalRAG, RAGError
from localrag import cli
from localrag.runs import query_vectors
from localrag.evaluation import diagnosis
from localrag.evaluation import scoring as ev
from localrag.goldset import generator as gen
from localrag.goldset import llm_questions
from localrag.goldset import format as gs
from localrag.goldset import lint as goldset_lint
from localrag.evaluation import report as eval_report
from localrag.runs import suite as eval_suite
from localrag.runs.defaults import CommandLine, EvalDefaults, EvalOptions
from localrag.runs.options import resolve
from localrag.runs.rows import evaluate, goldset_scoring, print_outcome, print_summary, refuse_ambiguous
from localrag.errors import EvalError
from localrag.files import display_path, same_path, warnings_once, wrote_line
from localrag.runs.outputs import QRELS_SUFFIX, check_outputs, load_json_report, write_reports
from localrag.evaluation.result import EXIT_OK, EXIT_USAGE, EvalResult
from localrag.runs.indexes import open_pdf_index, open_rag, query_vector_cache, sync_pdf_index
from localrag.runs.plan import SWEEP_AXES, profile_words, requested_settings
from localrag.settings import MODES, PAGE_SETTINGS, IndexSettings, mode_of

GOLDSET_PATH = "eval/goldset.csv"  # the goldset evaluated by default
# Copied to start a goldset: English headers, and the same with German ones.
GOLDSET_TEMPLATE_PATH = local_rag.PROJECT_DIR / "eval" / "goldset_template_en.csv"
GOLDSET_TEMPLATE_DE_PATH = local_rag.PROJECT_DIR / "eval" / "goldset_template.csv"
REPORT_PATH = "eval/baseline.txt"  # the committed plain-text report
ABLATION_REPORT_PATH = "eval/runs/ablation.txt"  # the --ablation table (per-configuration reports beside it)
VECTORSTORE_PATH = local_rag.VECTORSTORE_PATH  # the same index the retriever uses
K_VALUES = [5, 10, 20]  # cutoffs for goldsets; the deepest one is the retrieval depth
DATASET_K_VALUES = [1, 3, 5, 10, 100]  # cutoffs for BEIR datasets
USE_QUERY_INSTRUCTIONS = False  # append QUERY_ADDITIONAL_INSTRUCTIONS to each question
PAGE_TOLERANCE = gs.PAGE_TOLERANCE  # a hit may be this many pages away from the expected one
# The relative caches below (and JUDGE_CACHE_PATH) lie in the folder the run's default paths are read from (the
# project folder; git-ignored there), also for a run given every path and started in another folder: it leaves no
# cache in that folder (cache_root).
DATASET_CACHE = "eval/.cache/datasets"  # where dataset indexes are kept between runs
DATA_DIR = "eval/data"  # where --dataset NAME downloads are kept (beir/scifact -> eval/data/beir/scifact)
# The query vectors of earlier runs (localrag/runs/query_vectors.py; --query-cache): a rerun embeds only new questions.
# In the user's cache folder (CACHE_DIR of local_rag.py: $LOCALRAG_CACHE, else $XDG_CACHE_HOME/localrag, else
# ~/.cache/localrag), not in an index folder: a vector depends only on the model and the exact question (its key
# says both), so one file serves every index, goldset and working folder (a sweep's derived indexes, a read-only or
# a server index, an index rebuilt), and index folders hold only what their own tools know.
QUERY_VECTOR_CACHE = os.path.join(os.path.expanduser(local_rag.CACHE_DIR), "query_vectors.sqlite3")
# Where indexes with other index settings than the evaluated one are kept (--index-cache), one folder per docs
# folder and settings: `--chunk-size 800` builds one on first use and syncs it after, never the evaluated index.
INDEX_CACHE = "eval/.cache/indexes"
SWEEP_REPORT_PATH = "eval/runs/sweep.txt"  # the --sweep table of the default goldset and index (reports beside it)
DATASET_SEED = 0  # seed for --max-queries / --max-corpus-docs sampling
COMPARE_RESAMPLES = 10_000  # bootstrap and randomization resamples in comparisons
GENERATED_PATH = "eval/runs/goldset_generated.csv"  # where --generate writes its goldset
LABEL_SAMPLE_PATH = "eval/runs/answer_labels.csv"  # --label-sample's file
JUDGE_CACHE_PATH = "eval/judge_cache.json"  # the LLM judge's (and --llm's) cache of replies
SUITE_OUTPUT_DIR = "eval/suite_reports"  # where --suite writes entry reports and the summary
DATASET_REPORT_DIR = "eval/dataset_reports"  # default reports of --dataset runs, named after dataset and split
GOLDSET_REPORT_SUFFIX = ".report"  # another goldset's default report: beside it, <goldset name>.report.txt
DIAGNOSTIC_DEPTH = 100  # how deep the dense and BM25 lists are searched for stage ranks ("just outside the pool")
COMPARE_PATH = "eval/runs/baseline.compare.txt"  # the baseline's comparison with the report it replaced
RUNS_DIR = "eval/runs"  # reports of the default goldset under other settings, ablations, sweeps (git-ignored)

T = TypeVar("T")
# The examples at the end of --help: real commands, run from the project folder.
HELP_EXAMPLES = (
    ("python eval_retrieval.py --mode dense",
     "evaluate eval/goldset.csv with dense retrieval only (report: eval/runs/baseline.mode-dense.txt)"),
    ("python eval_retrieval.py --compare-to eval/baseline.json --no-rerank",
     "without the reranker, compared question by question with the committed baseline"),
    ("python eval_retrieval.py --ablation --output-dir /tmp/localrag-eval",
     "every retrieval mode with and without the reranker, the table and its reports in /tmp/localrag-eval"),
)


def cache_root(command: CommandLine) -> Path | None:
    """Where the run keeps the relative caches of the settings above: None (the working folder, as every default
    path) when it reads a default goldset or index from there, which check_project_folder makes the project
    folder or one laid out like it; else, every path given, the project folder: started in any other folder, a
    run leaves no cache there."""
    reads_defaults = not (command.compare or command.suite or command.dataset) and (
        command.goldset == GOLDSET_PATH or (command.index is None and not command.chroma_url))
    return None if reads_defaults else local_rag.PROJECT_DIR


def cache_path(path: str, root: Path | None) -> str:
    """A cache path of the settings above in `root` (see cache_root; None: as it is)."""
    return path if root is None else str(root / path)


def with_cache_root(command: CommandLine, root: Path | None) -> CommandLine:
    """The command line with its cache folders left at their defaults (--index-cache, --data-dir) in `root`."""
    return command.with_options(**{name: cache_path(default, root) for name, default in
                                   (("index_cache", INDEX_CACHE), ("data_dir", DATA_DIR))
                                   if getattr(command, name) == default})


def eval_defaults(root: Path | None = None) -> EvalDefaults:
    """This script's and local_rag.py's settings, read now (a test or a caller may have changed them); the caches
    in `root` (see cache_root; None: the working folder)."""
    lr = local_rag
    return EvalDefaults(
        goldset=GOLDSET_PATH, goldset_template=(GOLDSET_TEMPLATE_PATH, GOLDSET_TEMPLATE_DE_PATH),
        report=REPORT_PATH,
        ablation_report=ABLATION_REPORT_PATH, sweep_report=SWEEP_REPORT_PATH, runs_dir=RUNS_DIR,
        label_sample=LABEL_SAMPLE_PATH,
        compare_path=COMPARE_PATH, dataset_report_dir=DATASET_REPORT_DIR, goldset_report_suffix=GOLDSET_REPORT_SUFFIX,
        index=VECTORSTORE_PATH, docs=lr.DOCS_PATH, chroma_url=lr.CHROMA_URL,
        judge_cache=cache_path(JUDGE_CACHE_PATH, root), dataset_cache=cache_path(DATASET_CACHE, root),
        k_values=K_VALUES,
        dataset_k_values=DATASET_K_VALUES, page_tolerance=PAGE_TOLERANCE, use_query_instructions=USE_QUERY_INSTRUCTIONS,
        query_instructions=lr.QUERY_ADDITIONAL_INSTRUCTIONS,
        retriever={"retrieval_mode": lr.RETRIEVAL_MODE, "rrf_k": lr.RRF_K, "fusion": lr.FUSION,
                   "dense_weight": lr.DENSE_WEIGHT, "document_prior": lr.DOCUMENT_PRIOR, "rank_by": lr.RANK_BY,
                   "ivf_probes": lr.IVF_PROBES},
        index_settings={key: value for key, value in IndexSettings.from_constants(vars(lr)).chosen().items()
                        if key not in PAGE_SETTINGS},
        page_chunk_limit=lr.PAGE_CHUNK_LIMIT, retrieval_k=lr.RETRIEVAL_K,
        embedding_batch_size=lr.EMBEDDING_BATCH_SIZE, profiles=lr.PROFILES, open_retriever=LocalRAG)


# ----------------------------------------------------------------------------- CLI

def build_parser() -> argparse.ArgumentParser:
    p = cli.new_parser(__doc__, HELP_EXAMPLES)
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
    gold.add_argument("--replace-baseline", action="store_true",
                      help=f"let this run replace the committed {REPORT_PATH} although the same settings ran another "
                           f"configuration on this machine (a reranker loads here that was off for it, or the "
                           f"reverse); without it such a run writes under {RUNS_DIR}/ and says why. A run of changed "
                           f"settings replaces it anyway; an incomplete judge section never does. Any other run or "
                           f"output flag (--csv, --html, --out, ...) naming a file {Path(REPORT_PATH).stem}.* beside "
                           f"it is refused without this flag")
    gold.add_argument("--markdown", default=None, help="Markdown table for a pull request (default: none)")
    gold.add_argument("--output-dir", default=None, metavar="DIR",
                      help=f"write every report this run writes by default (report, JSON, details, the comparison "
                           f"file, ablation and sweep tables and their rows' reports, a dataset's and a suite's "
                           f"reports) into DIR, created if missing, under its default name; a path given with "
                           f"--report, --json, --markdown, ... stays as given, and {REPORT_PATH} is never replaced "
                           f"(default: none: {REPORT_PATH}, {RUNS_DIR}/, ...)")
    gold.add_argument("--csv", default=None, metavar="FILE",
                      help="one row per question (and per configuration of an ablation or sweep) with its ranks, "
                           "stage ranks and metrics, for a spreadsheet (default: none)")
    gold.add_argument("--html", default=None, metavar="FILE",
                      help="one self-contained HTML page of the run: its tables, the Hit@k curve (with the compared "
                           "run's), rank changes, a sweep's heatmap; no script, nothing loaded from elsewhere; with "
                           "--compare OLD NEW the page of NEW compared with OLD (default: none)")
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
                                                  f"the index; for the default index's first run "
                                                  f"{local_rag.DOCS_PATH}; an --index that holds no index yet needs "
                                                  f"--docs)")
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
    cli.add_index_setting_flags(settings, vars(local_rag),
                                offline_models=local_rag.OFFLINE_EMBEDDING_MODELS)
    settings.add_argument("--index-cache", default=INDEX_CACHE,
                          help="folder of the indexes built for other settings, one per docs folder and settings "
                               "(default: %(default)s of the project folder, also for a run started elsewhere)")
    idx.add_argument("--no-wait", action="store_true", help="fail at once when another process is writing the "
                                                            "index, instead of waiting for it")
    idx.add_argument("--check-store", action="store_true",
                     help="read the whole store back to check it against the manifest, even where the vector file "
                          "records that nothing changed since the last such read")
    idx.add_argument("--switch-folder", action="store_true", help="let the index follow --docs instead of the "
                                                                  "folder it follows now")
    idx.add_argument("--allow-empty", action="store_true", help="let a --docs folder without PDFs empty an index "
                                                                "that has files")
    ret = p.add_argument_group("retrieval")
    ret.add_argument("--mode", choices=MODES, default=None,
                     help=f"retrieval mode (default: the profile's, else RETRIEVAL_MODE in local_rag.py, "
                          f"{local_rag.RETRIEVAL_MODE})")
    ret.add_argument("--profile", choices=sorted(local_rag.PROFILES), default=None,
                     help="a preset of settings for one kind of shelf, PROFILES in local_rag.py: long-pdf is "
                          + profile_words(local_rag.PROFILES["long-pdf"])
                          + "; a flag given beside it wins (default: none)")
    ret.add_argument("--no-rerank", action="store_true", help="turn the cross-encoder reranker off; without this "
                                                              "flag reranking is on when the model is on this "
                                                              "machine (see --allow-downloads)")
    ret.add_argument("--rerank-model", default=None,
                     help=f"cross-encoder name or folder, or openai:MODEL to let a chat model on OPENAI_BASE_URL "
                          f"grade each candidate 0-10, its replies in the judge's cache and limited by "
                          f"--judge-max-calls; a model named here that is not on this machine is an error (default: "
                          f"{local_rag.RERANKER_MODEL})")
    cli.add_download_flag(ret, vars(local_rag), reranker=True)
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
                          f"(default: {display_path(QUERY_VECTOR_CACHE)}, in this user's cache folder; delete the "
                          f"file to clear it; --rebuild embeds every question again and replaces its vector; a file "
                          f"that is no such cache is refused)")
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
    ds.add_argument("--data-dir", default=DATA_DIR, help="where named datasets are downloaded and kept (default: "
                                                         "%(default)s of the project folder)")
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
    ds.add_argument("--run-file", default=None, metavar="FILE",
                    help="TREC run file of the evaluated lists, for trec_eval, ranx or ir_measures: a dataset's by "
                         "document; a goldset's by page ('file.pdf#p15', 1-based), or with --rank-by chunk by chunk "
                         "('file.pdf#p15#c0'), beside its qrels (--qrels-file), so that trec_eval's success@k and "
                         "recip_rank equal the report's Hit@k and MRR; one configuration only (default: none)")
    ds.add_argument("--qrels-file", default=None, metavar="FILE",
                    help=f"a goldset run's TREC qrels: every acceptable page (or chunk) of each question, the page "
                         f"tolerance included (default: the --run-file path with {QRELS_SUFFIX} appended)")
    jd = p.add_argument_group("judge", "LLM judge (OpenAI-compatible: OPENAI_API_KEY and/or OPENAI_BASE_URL)")
    jd.add_argument("--judge", default=None, metavar="MODEL", help="ask MODEL which of the first --judge-k "
                                                                  "passages answer each question (default: off)")
    jd.add_argument("--judge-k", type=int, default=None, help="passages shown to the judge (default: JUDGE_K "
                                                               "in localrag/evaluation/judge.py, 5)")
    jd.add_argument("--judge-max-calls", type=int, default=None, help="at most N new (uncached) judge calls in "
                                                                      "this run (default: no limit)")
    jd.add_argument("--judge-cache", default=None, help=f"judge cache file, shared by --answer-model, --llm and an "
                                                        f"openai: reranker; a file that is no such cache is refused "
                                                        f"(default: {JUDGE_CACHE_PATH})")
    ans = p.add_argument_group("answers", "answer-level evaluation: a chat's answers judged for correctness against "
                                          "the goldset's reference answers (column antwort/answer), faithfulness to "
                                          "their passages and their citations ([file, p. N])")
    ans.add_argument("--answers", default=None, metavar="FILE",
                     help="JSONL or CSV of the answers your chat gave: query_id or question, answer, and optionally "
                          "passages (a JSON list of {source, page, text}) (default: none)")
    ans.add_argument("--answer-model", default=None, metavar="MODEL",
                     help="generate the answers with MODEL from the first --answer-k passages of this run, through "
                          "the judge's client and cache (default: none)")
    ans.add_argument("--answer-k", type=int, default=None,
                     help="passages an --answer-model answer is given (default: RETRIEVAL_K in local_rag.py)")
    ans.add_argument("--label-sample", type=int, default=None, metavar="N",
                     help=f"write N judged answers, drawn uniformly at random with --seed, to --out FILE ("
                          f"{LABEL_SAMPLE_PATH} without it) for a person to label (default: none)")
    ans.add_argument("--answer-labels", default=None, metavar="FILE",
                     help="a labelled --label-sample file: the judge's agreement with people (Cohen's kappa) and "
                          "the PPI++ estimate of answer correctness in the Answers section (default: none)")
    ans.add_argument("--answer-judge", default=None, metavar="MODEL",
                     help="the model that judges the answers (default: the --judge model, else none: only the "
                          "deterministic figure and citation checks)")
    jd.add_argument("--judge-domain", default=None, help="field of the documents, to sharpen the prompt, e.g. "
                                                         "'option pricing' (default: JUDGE_DOMAIN, empty)")
    gl = p.add_argument_group("goldset tools", "grow and check goldsets")
    gl.add_argument("--lint", action="store_true", help="check the goldset against the index and docs folder; "
                                                        "exit 1 when anything is wrong")
    gl.add_argument("--generate", type=int, default=None, metavar="N", help="write N questions sampled from the "
                                                                            "indexed chunks (default: off)")
    gl.add_argument("--out", default=None, help=f"the file --generate writes its goldset to (an existing one is refused "
                                                f"unless --force), or --label-sample its answers to label (an existing "
                                                f"one is never replaced) (default: {GENERATED_PATH} and "
                                                f"{LABEL_SAMPLE_PATH})")
    gl.add_argument("--force", action="store_true", help="with --generate: replace an existing --out file; with any "
                                                         "output flag: let it replace a report of this tool with a "
                                                         "file of another kind (--csv onto a JSON report, ...)")
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


def parse(argv: Sequence[str] | None) -> CommandLine:
    """The command line's flags as one value (argparse exits with its message on a flag it cannot read)."""
    return CommandLine.from_flags(vars(build_parser().parse_args(argv)))


# ----------------------------------------------------------------------------- commands

def run_lint(options: EvalOptions, held: contextlib.ExitStack) -> int:
    """Check the goldset against the synced index: exit 1 when there is any finding, error or warning."""
    goldset = gs.read_goldset(options.goldset, GOLDSET_TEMPLATE_PATH)
    rag = open_pdf_index(options, held, requested_settings(options)).rag
    findings = goldset_lint.lint_index(rag, goldset.questions, goldset.messages, goldset_lint.index_docs(rag),
                                       progress=not options.quiet)
    print("\n".join(goldset_lint.render_lint(findings)))
    # Warnings too: a short question or a near-duplicate with other locations is wrong, only less harmful.
    return 1 if findings else 0


def run_generate(options: EvalOptions, held: contextlib.ExitStack, written: list[str]) -> int:
    """Sample chunks from the index and write a goldset of generated questions (its path added to `written`); 1 if
    the model stopped early."""
    o = options
    if o.generate < 1:
        raise EvalError(f"--generate needs a positive number of questions, got {o.generate}")
    # Checked before the index is synced and the model asked, which may take long.
    out = o.out or GENERATED_PATH
    check_outputs(o, [("--out", out)])  # --force or not
    gen.check_out_file(out, o.force)
    ask, stopped = (llm_questions.llm_question_asker(o.llm, o.judge_cache or o.defaults.judge_cache, o.quiet)
                    if o.llm else (None, lambda: None))
    rag = open_pdf_index(o, held, requested_settings(o)).rag
    before = Path(out).stat().st_mtime_ns if Path(out).exists() else None
    code = gen.generate_goldset(rag, o.generate, o.seed, out, ask, o.llm, stopped)
    if Path(out).exists() and Path(out).stat().st_mtime_ns != before:
        written.append(out)
    return code


def run_compare(reports: Sequence[str], intersect: bool, resamples: int, html: str | None = None,
                written: list[str] | None = None) -> int:
    """Compare two JSON reports (--compare OLD NEW: `reports`) and print the comparison; with `html` (--html) write
    NEW's page with the comparison too (its path added to `written`)."""
    old_path, new_path = reports
    old, new = load_json_report(old_path), load_json_report(new_path)
    compare = ev.compare_results(old, new, intersect, display_path(old_path), resamples=resamples)
    if html:
        from localrag.evaluation import html_report

        (written if written is not None else []).extend(
            write_reports([(html, html_report.render_html(dataclasses.replace(new, compare=compare), old))]))
    print(f"{display_path(new_path)} vs. {display_path(old_path)}")
    print("\n".join(eval_report.render_compare(compare)))
    if old.answers and new.answers:
        from localrag.runs.answering import compare_answers

        print("\n" + "\n".join(compare_answers(old.answers, new.answers, resamples)))
    return 0


def run_explain(options: EvalOptions, held: contextlib.ExitStack) -> int:
    """Print the details block of one question (of the goldset, by text or query id, or any other question)
    for the configuration of `options`: nothing is evaluated or written."""
    o = options
    wanted = " ".join(o.explain.split())
    explicit_goldset = not same_path(o.goldset, GOLDSET_PATH)
    questions = gs.read_goldset(o.goldset, GOLDSET_TEMPLATE_PATH).questions \
        if explicit_goldset or Path(o.goldset).exists() else []
    question = next((q for q in questions if q.query_id == wanted), None) or next(
        (q for q in questions if " ".join(q.question.split()).casefold() == wanted.casefold()), None)
    rag = open_rag(o, held, o.index or VECTORSTORE_PATH)
    sync_pdf_index(rag, o)
    if question is not None:  # a bare name of files in two folders: either file's page would be marked expected
        refuse_ambiguous(goldset_lint.lint_index(rag, [question], [], goldset_lint.index_docs(rag)), o.goldset)
    rerank = rag.reranker is not None
    text = question.question if question else wanted
    if mode_of(o.mode).dense:  # a cached vector spares loading the model; a new one is embedded, not stored
        query_vectors.fill(rag.retriever, query_vector_cache(o), [rag.prepare_query(text)], embed=False,
                           batch_size=1)
    block = ev.explain_question(rag, question, text, goldset_scoring(o), mode=o.mode, rerank=rerank)
    print(f"{rag.location if rag.chroma_url else display_path(rag.path)}: {rag.describe_order(o.mode, rerank)}, "
          f"{o.mode} mode, {rag.candidate_depth(max(o.k_values))} candidates per retriever, lists searched "
          f"{o.diagnostic_depth} deep" + ("" if question else f"; not a question or query id of "
                                                              f"{display_path(o.goldset)}"))
    print()
    print(diagnosis.unescape_markdown("\n".join(block).rstrip()))  # read on a terminal: no Markdown escapes
    return EXIT_OK


def run_suite(options: EvalOptions, written: list[str]) -> int:
    """Every entry of the --suite file evaluated in this process, then the summary table (--output-dir, else
    SUITE_OUTPUT_DIR); 1 if any failed. Every file written is added to `written`."""
    return eval_suite.run_suite(options.suite, options.output_name,
                                lambda entry, report: run_suite_entry(entry, report, options, written),
                                output_dir=options.output_dir or SUITE_OUTPUT_DIR, written=written)


def run_suite_entry(entry: Mapping[str, Any], report: Path, suite: CommandLine,
                    written: list[str]) -> EvalResult | list[EvalResult] | None:
    """One suite entry: its options read as on the command line (plus --quiet, --rebuild and --no-sync of the
    suite's command line), reports at `report` (added to `written`): its result, a sweep's results (one per row),
    or None, with the reason on stderr, when it evaluated nothing."""
    try:
        command = parse(option_flags(entry))
    except SystemExit:  # argparse printed why (an unknown key, a bad value); the other entries still run
        return None
    command = dataclasses.replace(command, report=str(report), json=str(report.with_suffix(".json")),
                                  quiet=command.quiet or suite.quiet, rebuild=command.rebuild or suite.rebuild,
                                  no_sync=command.no_sync or suite.no_sync)
    outcome, _ = guarded(command, evaluate)
    if outcome is None:
        return None
    written += outcome.written
    if command.sweep:  # the table was printed
        return outcome.results
    print_outcome(outcome, command.quiet)
    return outcome.results[0]


def option_flags(options: Mapping[str, Any]) -> list[str]:
    """A suite entry's options as this parser's flags (suite.option_flags)."""
    repeatable = {action.dest for action in build_parser()._actions if isinstance(action, argparse._AppendAction)}
    return eval_suite.option_flags(options, repeatable)


def run_command(options: EvalOptions, held: contextlib.ExitStack, written: list[str]) -> int:
    """Run what the resolved options ask for: a tool (compare, suite, lint, generate, explain), else the
    evaluation (plan, open and sync, retrieve and score, write, gate); the exit code. Index locks go on `held`,
    every file written on `written`."""
    o = options
    if not (o.compare or o.suite or o.dataset):  # those read only the files given
        check_project_folder(o.goldset, o.index, o.docs, o.chroma_url)
    tools: tuple[tuple[Any, Callable[[], int]], ...] = (
        (o.compare, lambda: run_compare(o.compare, o.intersect, o.resamples, o.html, written)),
        (o.suite, lambda: run_suite(o, written)),
        (o.lint, lambda: run_lint(o, held)), (o.generate is not None, lambda: run_generate(o, held, written)),
        (o.explain is not None, lambda: run_explain(o, held)))
    for asked, tool in tools:
        if asked:
            return tool()
    outcome = evaluate(o, held)
    written += outcome.written
    label_file = o.out or o.defaults.label_sample
    if o.label_sample and Path(label_file).exists():  # refused before the run when it existed: written now
        written.append(label_file)
    if len(outcome.results) == 1 and not o.sweep_axes:  # an ablation or a sweep printed its table
        print_summary(outcome, o.quiet)
    return outcome.results[0].status.exit_code


def check_project_folder(goldset: str, index: str | None, docs: str | None, chroma_url: str | None) -> None:
    """EvalError 'run from the project folder X' when the run, started in another folder, would read the default
    goldset, index or docs folder from there instead of the project's."""
    defaults = [("--goldset", "goldset", GOLDSET_PATH)] if goldset == GOLDSET_PATH else []
    if index is None and not chroma_url:
        defaults.append(("--index", "index", VECTORSTORE_PATH))
        defaults += [("--docs", "docs folder", local_rag.DOCS_PATH)] if docs is None else []
    if problem := cli.project_folder_problem(local_rag.PROJECT_DIR, defaults):
        raise EvalError(problem)


def guarded(command: CommandLine, run: Callable[[EvalOptions, contextlib.ExitStack], T]) -> tuple[T | None, int]:
    """(run(the options resolved, the run's lock stack), EXIT_OK), or (None, exit code) with the error on stderr.
    Index locks taken by open_rag are held until run returns."""
    with contextlib.ExitStack() as held:
        try:
            root = cache_root(command)
            return run(resolve(with_cache_root(command, root), eval_defaults(root)), held), EXIT_OK
        except RAGError as exc:  # the package's one error family
            print(f"error: {exc}", file=sys.stderr)
            return None, EXIT_USAGE
        except KeyboardInterrupt:
            print("interrupted: reports already written are unchanged", file=sys.stderr)
            return None, 130


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; the last line on stdout of a run that writes files (an evaluation, a suite,
    --generate) names every file it wrote, also under --quiet (a result, not progress), or says it wrote none; one
    stopped by an error says so only when it had written a file. --compare, --lint and --explain only print."""
    command, written = parse(argv), []
    with warnings_once():  # a warning of every index or suite entry is said once
        code, failure = guarded(command, lambda options, held: run_command(options, held, written))
    prints_only = command.compare or command.lint or command.explain is not None
    if (code is not None and not prints_only) or written:
        print(wrote_line(written), flush=True)
    return failure if code is None else code


if __name__ == "__main__":
    cli.exit_with(main)
