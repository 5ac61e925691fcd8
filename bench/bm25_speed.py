"""Speed of bm25_index.BM25Index against rank-bm25's BM25Okapi on ~25,000 chunks of ~2,000 characters.

Chunks come from SciFact (``../shared/data/scifact/corpus.jsonl`` beside the project), its abstracts
concatenated in a fresh shuffled order per pass and cut at word boundaries, so the chunks are distinct
real text; without SciFact a synthetic Zipf-distributed corpus is generated. Times tokenizing, build,
save, load and per-query latency (median, p95), prints a table with speed-ups, and checks that both
give the same scores (exit status 1 if not).

    python bench/bm25_speed.py [--chunks 25000] [--queries 200]
"""

from __future__ import annotations

import argparse
import json
import pickle
import random
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from rank_bm25 import BM25Okapi

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from localrag.cli import HelpFormatter  # noqa: E402 - the repository root is on sys.path above
from localrag.search.bm25 import ARRAYS_FILE, META_FILE, BM25Index, tokenize  # noqa: E402

# SciFact corpus and claims, beside the project root (optional).
SCIFACT_DIR = Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact"
# Number of chunks to index (the retriever's target scale).
DEFAULT_CHUNKS = 25_000
# Characters per chunk, as the PDF splitter produces.
DEFAULT_CHUNK_CHARS = 2_000
# Queries timed per implementation.
DEFAULT_QUERIES = 200
# Results per query.
DEFAULT_K = 10
# Largest allowed |score difference| between the two implementations.
TOLERANCE = 1e-9
# Synthetic corpus: vocabulary size and Zipf exponent of word frequencies.
SYNTHETIC_VOCABULARY = 60_000
SYNTHETIC_ZIPF = 1.1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Benchmark BM25Index against rank-bm25 BM25Okapi and check score equality.",
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--chunks", type=int, default=DEFAULT_CHUNKS, help="number of chunks to index")
    parser.add_argument("--chunk-chars", type=int, default=DEFAULT_CHUNK_CHARS, help="characters per chunk")
    parser.add_argument("--queries", type=int, default=DEFAULT_QUERIES, help="queries timed per implementation")
    parser.add_argument("--k", type=int, default=DEFAULT_K, help="results per query")
    parser.add_argument(
        "--scifact-dir", type=Path, default=SCIFACT_DIR, help="SciFact folder; synthetic text if absent"
    )
    parser.add_argument("--synthetic", action="store_true", help="use synthetic text even if SciFact exists")
    parser.add_argument("--seed", type=int, default=0, help="random seed for chunking, text and queries")
    return parser


def cut_chunks(texts: Sequence[str], chunk_chars: int, n_chunks: int, rng: random.Random) -> list[str]:
    """Concatenate texts (reshuffled each pass) and cut at spaces into chunks of about chunk_chars."""
    chunks: list[str] = []
    while len(chunks) < n_chunks:
        order = list(texts)
        rng.shuffle(order)
        stream = " ".join(order)
        start = 0
        while start < len(stream) and len(chunks) < n_chunks:
            end = stream.rfind(" ", start, start + chunk_chars)
            end = len(stream) if start + chunk_chars >= len(stream) else (end if end > start else start + chunk_chars)
            chunks.append(stream[start:end])
            start = end + 1
    return chunks


def synthetic_texts(rng: random.Random, n_words: int) -> tuple[list[str], list[str]]:
    """Zipf-distributed pseudo-words with some numbers, split into 'abstracts'; plus 200 word pool for queries."""
    syllables = ["ka", "ri", "to", "men", "sul", "fa", "de", "lon", "pri", "ex", "ta", "vo", "ne", "gra"]
    words = ("".join(rng.choices(syllables, k=rng.randint(2, 4))) for _ in range(SYNTHETIC_VOCABULARY))
    vocabulary = list(dict.fromkeys(words))
    weights = 1.0 / np.arange(1, len(vocabulary) + 1) ** SYNTHETIC_ZIPF
    picks = np.random.default_rng(rng.randrange(2**32)).choice(len(vocabulary), size=n_words, p=weights / weights.sum())
    words = [vocabulary[i] if i % 97 else f"{i % 1000}.{i % 7}" for i in picks.tolist()]
    texts = [" ".join(words[i : i + 250]) for i in range(0, len(words), 250)]
    return texts, vocabulary[:5000]


def load_scifact(directory: Path) -> tuple[list[str], list[str]]:
    """SciFact abstracts (title + text) and claims."""
    with (directory / "corpus.jsonl").open(encoding="utf-8") as f:
        texts = [f"{d['title']} {d['text']}" for d in map(json.loads, f)]
    with (directory / "queries.jsonl").open(encoding="utf-8") as f:
        claims = [q["text"] for q in map(json.loads, f)]
    return texts, claims


def timed(func: Callable[[], object]) -> tuple[object, float]:
    start = time.perf_counter()
    result = func()
    return result, time.perf_counter() - start


def latencies_ms(func: Callable[[str], object], queries: Sequence[str]) -> np.ndarray:
    times = []
    for query in queries:
        start = time.perf_counter()
        func(query)
        times.append((time.perf_counter() - start) * 1000)
    return np.asarray(times)


def rank_bm25_search(model: BM25Okapi, ids: Sequence[str], query: str, k: int) -> list[tuple[str, float]]:
    scores = model.get_scores(tokenize(query))
    best = np.argsort(-scores, kind="stable")[:k]
    return [(ids[i], float(scores[i])) for i in best]


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    rng = random.Random(args.seed)
    if not args.synthetic and (args.scifact_dir / "corpus.jsonl").is_file():
        source, claims = load_scifact(args.scifact_dir)
        queries = rng.sample(claims, min(args.queries, len(claims)))
        label = f"SciFact abstracts from {args.scifact_dir}"
    else:
        source, pool = synthetic_texts(rng, args.chunks * args.chunk_chars // 7 + 1000)
        queries = [" ".join(rng.choices(pool, k=rng.randint(3, 12))) for _ in range(args.queries)]
        label = "synthetic Zipf text"
    texts = cut_chunks(source, args.chunk_chars, args.chunks, rng)
    ids = [f"chunk-{i}" for i in range(len(texts))]
    mean_chars = sum(map(len, texts)) / len(texts)
    print(f"corpus: {len(texts)} chunks of {mean_chars:.0f} characters on average ({label}); {len(queries)} queries")

    tokenized, t_tokenize = timed(lambda: [tokenize(t) for t in texts])
    reference, t_ref_build = timed(lambda: BM25Okapi(tokenized))
    index, t_build = timed(lambda: BM25Index.build_from_tokens(ids, tokenized))
    _, t_build_texts = timed(lambda: BM25Index.build(ids, texts))

    with tempfile.TemporaryDirectory() as folder:
        pickle_path = Path(folder) / "rank_bm25.pkl"
        _, t_ref_save = timed(lambda: pickle_path.write_bytes(pickle.dumps(reference, pickle.HIGHEST_PROTOCOL)))
        _, t_ref_load = timed(lambda: pickle.loads(pickle_path.read_bytes()))
        _, t_save = timed(lambda: index.save(folder, fingerprint="bench"))
        loaded, t_load = timed(lambda: BM25Index.load(folder, expected_fingerprint="bench"))
        ref_mb = pickle_path.stat().st_size / 1e6
        idx_mb = sum((Path(folder) / name).stat().st_size for name in (ARRAYS_FILE, META_FILE)) / 1e6
    if loaded is None:
        print("error: the saved BM25Index did not load back", file=sys.stderr)
        return 1

    ref_ms = latencies_ms(lambda q: rank_bm25_search(reference, ids, q, args.k), queries)
    idx_ms = latencies_ms(lambda q: loaded.search(q, args.k), queries)

    rows = [
        ("build from tokens, s", t_ref_build, t_build),
        ("save, s (pickle / npz+json)", t_ref_save, t_save),
        ("load, s", t_ref_load, t_load),
        ("query median, ms", float(np.median(ref_ms)), float(np.median(idx_ms))),
        ("query p95, ms", float(np.percentile(ref_ms, 95)), float(np.percentile(idx_ms, 95))),
    ]
    print(f"\n{'step':<30}{'rank-bm25':>12}{'BM25Index':>12}{'speed-up':>10}")
    for name, ref, ours in rows:
        print(f"{name:<30}{ref:>12.4f}{ours:>12.4f}{ref / ours if ours else float('inf'):>9.1f}x")
    print(f"{'size on disk, MB':<30}{ref_mb:>12.1f}{idx_mb:>12.1f}")
    print(f"tokenize all chunks (shared by both): {t_tokenize:.2f} s; "
          f"BM25Index.build from texts (tokenize + build): {t_build_texts:.2f} s; "
          f"{len(index.vocabulary)} terms, {index.weights.nnz} (term, chunk) weights")

    worst, top_agree = 0.0, 0
    for query in queries:
        tokens = tokenize(query)
        expected, actual = reference.get_scores(tokens), loaded.score_tokens(tokens)
        worst = max(worst, float(np.max(np.abs(expected - actual))))
        ref_top = [d for d, _ in rank_bm25_search(reference, ids, query, args.k)]
        top_agree += ref_top == [d for d, _ in loaded.search(query, args.k)]
    print(f"score check over {len(queries)} queries x {len(ids)} chunks: max |difference| = {worst:.3g} "
          f"(tolerance {TOLERANCE:g}); identical top-{args.k} lists: {top_agree}/{len(queries)}")
    if worst > TOLERANCE:
        print("error: BM25Index scores differ from rank-bm25 beyond the tolerance", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
