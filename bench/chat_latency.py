"""Chat latency on the FinanceBench index: LocalRAG start-up, first query, then warm queries per retrieval mode.

Answers "how long does a chat wait for its chunks": the time to import local_rag and construct
``LocalRAG(index, reranker_model=None)``, the first query (it loads Chroma's HNSW graph, the BM25 arrays and the
in-memory copy of the chunks), then p50/p95 of ``retrieve(question, k)`` per mode over `--questions` questions:

* chat: the query vector is not cached, so each query is embedded, as a new question in a chat is;
* vector cached: the same with every vector computed beforehand, the retrieval alone;
* bare: a script doing the same retrieval work without LocalRAG, in the same process and run: Chroma's
  collection.query with the precomputed vector (ids and distances), BM25 scores added row by row from the saved
  arrays, reciprocal rank fusion or the union in a dict, each page once (RANK_BY "page"), and the k (id, text,
  metadata, score) of the answer taken from an in-memory copy of the chunks. Its top-k ids are checked against LocalRAG's.

The ratio vector cached / bare is LocalRAG's overhead; the machine's load average stands beside every table
(time figures on a shared machine are noisy, ratios less so). Reranking is timed too when the cross-encoder
RERANKER_MODEL loads offline; otherwise the reason is printed.

    python bench/chat_latency.py [--index DIR] [--questions 100] [--json FILE]
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Callable, Sequence

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
from localrag.cli import HelpFormatter  # noqa: E402 - the repository root is on sys.path above

DATA_DIR = REPO_ROOT.parent / "shared" / "data" / "financebench"
GOLDSET = DATA_DIR / "goldset_dev.csv"  # 63 distinct questions (column "frage")
EXTRA_QUESTIONS = DATA_DIR / "financebench_dev.jsonl"  # FinanceBench records (field "question"), added when new
# The index bench/index_financebench.py builds.
INDEX_DIR = Path(os.environ.get("LOCALRAG_CACHE", "~/.cache/localrag")).expanduser() / "bench" / "financebench-index"
QUESTIONS = 100  # timed queries per mode; repeats fill up when the sources hold fewer distinct questions
K = 5  # chunks per answer (local_rag.RETRIEVAL_K)
MODES = ("dense", "bm25", "hybrid", "union")


# ----------------------------------------------------------------------------- pure helpers

def question_list(distinct_sources: Sequence[Sequence[str]], count: int) -> tuple[list[str], int]:
    """(`count` questions, how many of them are distinct): each source's new questions in order, then the
    distinct ones again from the start (repeats) until `count` are there. No questions at all is an error."""
    distinct = list(dict.fromkeys(q.strip() for source in distinct_sources for q in source if q.strip()))
    if not distinct:
        raise ValueError("no questions found in the question sources; give --goldset a CSV with a 'frage' column")
    questions = [distinct[i % len(distinct)] for i in range(count)]
    return questions, min(count, len(distinct))


def percentile(values: Sequence[float], share: float) -> float:
    """Nearest-rank percentile: the smallest value with at least `share` of all values at or below it.

    E.g. of 100 sorted values, p50 is the 50th and p95 the 95th."""
    if not values:
        raise ValueError("no values to take a percentile of")
    ordered = sorted(values)
    return ordered[max(1, math.ceil(share * len(ordered))) - 1]


def rrf(rankings: Sequence[Sequence[str]], k: int) -> list[tuple[str, float]]:
    """Reciprocal rank fusion written out again for the bare script (ties: first appearance)."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, doc_id in enumerate(ranking, start=1):
            scores[doc_id] = scores.get(doc_id, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda item: -item[1])


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Plain-text table; every column but the first right-aligned."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(r) for r in rows])


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- the bare script

class Bare:
    """The retrieval work of LocalRAG without LocalRAG: raw Chroma, raw BM25 arrays, RRF/union, answer tuples."""

    def __init__(self, index: Path, collection: str, chunks: dict[str, tuple[str, dict]], stemmer: str):
        import chromadb
        import numpy as np
        from chromadb.config import Settings

        from localrag.search.bm25 import tokenize

        self.np, self.stemmer, self.tokenize = np, stemmer, tokenize
        client = chromadb.PersistentClient(path=str(index), settings=Settings(anonymized_telemetry=False))
        self.collection = client.get_collection(collection)
        meta = json.loads((index / "bm25" / "bm25.json").read_text(encoding="utf-8"))
        with np.load(index / "bm25" / "bm25.npz", allow_pickle=False) as arrays:
            self.data, self.indices, self.indptr = arrays["data"], arrays["indices"], arrays["indptr"]
        self.ids = meta["ids"]
        self.terms = {term: i for i, term in enumerate(meta["vocabulary"])}
        self.chunks = chunks

    def dense(self, vector: Sequence[float], depth: int) -> list[tuple[str, float]]:
        found = self.collection.query(query_embeddings=[vector], n_results=depth, include=["distances"])
        return [(i, 1.0 - d) for i, d in zip(found["ids"][0], found["distances"][0])]

    def bm25(self, query: str, depth: int) -> list[tuple[str, float]]:
        np = self.np
        scores = np.zeros(len(self.ids))
        matched = np.zeros(len(self.ids), dtype=bool)
        for token in self.tokenize(query, self.stemmer):
            term = self.terms.get(token)
            if term is not None:
                rows = slice(self.indptr[term], self.indptr[term + 1])
                scores[self.indices[rows]] += self.data[rows]
                matched[self.indices[rows]] = True
        candidates = np.flatnonzero(matched)
        if len(candidates) > depth:  # keep what ties with the depth-th best, then sort those few
            values = scores[candidates]
            candidates = candidates[values >= np.partition(values, len(values) - depth)[len(values) - depth]]
        best = candidates[np.lexsort((candidates, -scores[candidates]))][:depth]
        return [(self.ids[i], float(scores[i])) for i in best]

    def retrieve(self, mode: str, query: str, vector: Sequence[float], k: int, depth: int,
                 rrf_k: int, rank_by: str) -> list[tuple[str, str, dict, float]]:
        if mode == "dense":
            ranked = self.dense(vector, depth)
        elif mode == "bm25":
            ranked = self.bm25(query, depth)
        else:
            dense, bm25 = [i for i, _ in self.dense(vector, depth)], [i for i, _ in self.bm25(query, depth)]
            if mode == "hybrid":
                ranked = rrf([dense, bm25], rrf_k)
            else:
                order = list(dict.fromkeys(dense + bm25))
                ranked = [(i, 1.0 / position) for position, i in enumerate(order, start=1)]
        if rank_by == "page":  # each page once, at its best chunk
            best: dict[tuple[str, int], tuple[str, float]] = {}
            for i, score in ranked:
                best.setdefault((self.chunks[i][1]["source"], self.chunks[i][1]["page"]), (i, score))
            ranked = list(best.values())
        return [(i, *self.chunks[i], score) for i, score in ranked[:k]]


# ----------------------------------------------------------------------------- measurements

def timed(calls: Sequence[Callable[[], object]]) -> list[float]:
    """Milliseconds of each call."""
    out = []
    for call in calls:
        started = time.perf_counter()
        call()
        out.append((time.perf_counter() - started) * 1000)
    return out


def forget_query_vectors(rag) -> None:
    """Drop the query vectors LocalRAG keeps in memory, so the next query is embedded as a new question is."""
    vectors = getattr(rag.retriever, "_query_vectors", None)
    if not isinstance(vectors, dict):
        raise SystemExit("LocalRAG's Retriever keeps no _query_vectors dict any more; update forget_query_vectors")
    vectors.clear()


def read_questions(goldset: Path, extra: Path | None) -> list[list[str]]:
    with goldset.open(encoding="utf-8", newline="") as handle:
        sources = [[row["frage"] for row in csv.DictReader(handle)]]
    if extra is not None and extra.is_file():
        with extra.open(encoding="utf-8") as handle:
            sources.append([json.loads(line)["question"] for line in handle if line.strip()])
    return sources


def run(args: argparse.Namespace) -> dict:
    results: dict = {"load_before": os.getloadavg(), "profile": args.profile}
    started = time.perf_counter()
    import local_rag
    results["import_s"] = time.perf_counter() - started

    sources = read_questions(args.goldset, args.extra_questions)
    questions, distinct = question_list(sources, args.questions)
    results.update(questions=len(questions), distinct=distinct,
                   sources={str(p): len(set(s)) for p, s in zip([args.goldset, args.extra_questions], sources)})

    progress(f"constructing LocalRAG({args.index}, reranker_model=None)")
    started = time.perf_counter()
    rag = local_rag.LocalRAG(args.index, reranker_model=None, quiet=True)
    results["construct_s"] = time.perf_counter() - started
    results["chunks"] = rag.info.get("counts", {}).get("chunks")
    results["backend"] = rag.settings["embedding_backend"]
    started = time.perf_counter()
    rag.retrieve(questions[0], args.k, mode="hybrid")
    results["first_query_s"] = time.perf_counter() - started

    reranker_error = None
    try:
        reranker = local_rag.load_reranker(local_rag.RERANKER_MODEL) if local_rag.RERANKER_MODEL else None
    except local_rag.RAGError as exc:
        reranker, reranker_error = None, exc.reason or str(exc)
    results["reranker"] = reranker_error or ("loaded" if reranker is not None else "RERANKER_MODEL is None")

    progress(f"timing {len(questions)} queries per mode (query vector not cached)")
    prepared = [rag.prepare_query(q) for q in questions]

    def chat_call(question: str, mode: str) -> Callable[[], object]:
        def call():
            forget_query_vectors(rag)
            return rag.retrieve(question, args.k, mode=mode)
        return call

    chat = {mode: timed([chat_call(q, mode) for q in questions]) for mode in MODES}
    # Embedding alone, as retrieve() does it (embed_query of the prepared text), for the split.
    results["embed_ms"] = timed([lambda q=q: rag.embeddings.embed_query(q) for q in prepared])
    forget_query_vectors(rag)
    rag.embed_queries(questions)
    vectors = {q: rag.query_vector(q) for q in prepared}
    cached = {mode: timed([lambda q=q, m=mode: rag.retrieve(q, args.k, mode=m) for q in questions])
              for mode in MODES}

    progress("timing the bare script")
    chunks = {i: (t, m) for i, t, m in rag.indexed_chunks()}
    bare = Bare(Path(rag.path), rag.collection_name, chunks, rag.settings["bm25_stemmer"])
    depth = rag.candidate_depth(args.k)
    bare_ms = {mode: timed([lambda q=q, m=mode: bare.retrieve(m, q, vectors[q], args.k, depth, rag.rrf_k, rag.rank_by)
                            for q in prepared]) for mode in MODES}
    mismatches = {mode: sum([d.id for d, _ in rag.retrieve(q, args.k, mode=mode)]
                            != [i for i, *_ in bare.retrieve(mode, p, vectors[p], args.k, depth, rag.rrf_k, rag.rank_by)]
                            for q, p in zip(questions, prepared)) for mode in MODES}
    results.update(chat_ms=chat, cached_ms=cached, bare_ms=bare_ms, mismatches=mismatches)
    if args.profile:  # the profile's retrieval settings over the same index (its index settings are the index's)
        options = {key: value for key, value in local_rag.PROFILES[args.profile].items()
                   if key in ("retrieval_mode", "fusion", "dense_weight", "document_prior")}
        profiled = local_rag.LocalRAG(args.index, reranker_model=None, quiet=True, **options)
        profiled.retrieve(questions[0], args.k)  # its first query reads the chunks and BM25 arrays

        def profile_call(question: str) -> Callable[[], object]:
            def call():
                forget_query_vectors(profiled)
                return profiled.retrieve(question, args.k)
            return call

        results["profile_chat_ms"] = timed([profile_call(q) for q in questions])
        forget_query_vectors(profiled)
        profiled.embed_queries(questions)
        results["profile_cached_ms"] = timed([lambda q=q: profiled.retrieve(q, args.k) for q in questions])
    if reranker is not None:
        reranking = local_rag.LocalRAG(args.index, quiet=True)
        results["rerank_ms"] = timed([lambda q=q: reranking.retrieve(q, args.k, rerank=True) for q in questions])
    results["load_after"] = os.getloadavg()
    return results


def render(results: dict, k: int) -> str:
    def ms(values: Sequence[float], share: float) -> str:
        return f"{percentile(values, share):.1f}"

    repeats = results["questions"] - results["distinct"]
    lines = [f"Chat latency on {results['chunks']:,} chunks ({results['backend']}), k={k}, reranking off; "
             f"{results['questions']} questions per mode: {results['distinct']} distinct"
             + (f", {repeats} repeated from the start (their vectors are not cached either)" if repeats else ""),
             f"before: {load_text_of(results['load_before'])}; after: {load_text_of(results['load_after'])}",
             "",
             format_table(["start-up", "seconds"], [
                 ["import local_rag", f"{results['import_s']:.2f}"],
                 ["LocalRAG(...) (model load)", f"{results['construct_s']:.2f}"],
                 ["first query (hybrid)", f"{results['first_query_s']:.2f}"]]),
             "",
             f"query embedding alone: p50 {ms(results['embed_ms'], .5)} ms, p95 {ms(results['embed_ms'], .95)} ms",
             ""]
    rows = []
    for mode in MODES:
        chat, cached, bare = results["chat_ms"][mode], results["cached_ms"][mode], results["bare_ms"][mode]
        rows.append([mode, ms(chat, .5), ms(chat, .95), ms(cached, .5), ms(cached, .95), ms(bare, .5),
                     ms(bare, .95), f"{percentile(cached, .5) / percentile(bare, .5):.2f}",
                     str(results["mismatches"][mode])])
    if "profile_chat_ms" in results:
        chat, cached = results["profile_chat_ms"], results["profile_cached_ms"]
        hybrid = results["cached_ms"]["hybrid"]
        rows.append([f"profile {results['profile']}", ms(chat, .5), ms(chat, .95), ms(cached, .5), ms(cached, .95),
                     "-", "-", f"{percentile(cached, .5) / percentile(hybrid, .5):.2f} of hybrid", "-"])
    if "rerank_ms" in results:
        rerank = results["rerank_ms"]
        rows.append(["hybrid+rerank", ms(rerank, .5), ms(rerank, .95), "-", "-", "-", "-", "-", "-"])
    lines.append(format_table(["mode (ms)", "chat p50", "chat p95", "cached p50", "cached p95", "bare p50",
                               "bare p95", "cached/bare p50", "top-k differs"], rows))
    lines += ["", "chat: the query embedded in the call; cached: its vector computed before; bare: raw Chroma + BM25 "
                  "arrays + fusion without LocalRAG, vector precomputed"]
    if "rerank_ms" not in results:
        lines.append(f"reranking not timed: {results['reranker']}")
    return "\n".join(lines)


def load_text_of(load: Sequence[float]) -> str:
    return f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} ({os.cpu_count()} cores)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=HelpFormatter)
    parser.add_argument("--index", type=Path, default=INDEX_DIR, help="built FinanceBench index (index_financebench.py)")
    parser.add_argument("--goldset", type=Path, default=GOLDSET, help="CSV whose 'frage' column gives questions")
    parser.add_argument("--extra-questions", type=Path, default=EXTRA_QUESTIONS,
                        help="JSON lines whose 'question' fields are added when not in the goldset")
    parser.add_argument("--questions", type=int, default=QUESTIONS, help="timed queries per mode")
    parser.add_argument("-k", type=int, default=K, help="chunks per answer")
    parser.add_argument("--json", type=Path, default=None, metavar="FILE", help="also write the results as JSON")
    parser.add_argument("--profile", default=None, help="also time a profile of local_rag.PROFILES (its retrieval "
                                                        "settings over this index; long-pdf), against hybrid "
                                                        "(default: none)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not (args.index / "index_info.json").is_file():
        print(f"error: no index at {args.index}; build it with python bench/index_financebench.py "
              f"--embedding-backend openvino-int8 --skip-extract, or give --index", file=sys.stderr)
        return 2
    if args.questions < 1 or args.k < 1:
        print(f"error: --questions and -k must be at least 1, got {args.questions} and {args.k}", file=sys.stderr)
        return 2
    results = run(args)
    print(render(results, args.k))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
