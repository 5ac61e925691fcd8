"""Hybrid fusion and BM25 tokenization choices for a BEIR dataset, chosen honestly by 2-fold cross-validation.

Reads a dataset index that `eval_retrieval.py --dataset ...` built (its chunks and its dense model), retrieves
each query's dense list once, builds BM25 over the same chunks with each tokenization of `--bm25`, and scores a
grid of fusions: RRF constant k, the dense side's weight (weighted RRF: 2w/(k + dense rank) + 2(1-w)/(k + BM25
rank), w = 0.5 is plain RRF) and the depth of each list (candidates per retriever). Scoring as the evaluation
does: chunks fused, collapsed to documents (best chunk), ranked as trec_eval ranks a run.

Cross-validation: the queries fall into two folds by a seeded hash of their id; the configuration best on one
fold (MRR@10) is reported on the other, and vice versa, against the reference configuration on the same
queries (paired randomization test). A figure chosen and reported on the same queries is printed only as
"in-sample" and is never an estimate.

Tokenizations (`--bm25`): none (casefolded words), fold (umlauts folded: ä->a, ö->o, ü->u, ß->ss), german
(Snowball, which folds umlauts and ae/oe/ue itself), german+split (localrag.search.bm25's "german+decompound": words
first split at compound joints found in the corpus vocabulary, Koehn & Knight 2003, see CompoundSplitter). Run from the repository root:

    python bench/fusion_cv.py --dataset ../shared/data/germanquad --split dev --index eval/.cache/datasets/NAME
"""
from __future__ import annotations

import argparse
import hashlib
import itertools
import sys
import time
from pathlib import Path
from typing import Iterable, Mapping, Sequence

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
from localrag.cli import HelpFormatter  # noqa: E402 - the repository root is on sys.path above

RRF_KS = (1, 2, 5, 10, 20, 30, 60, 100)  # RRF constants tried (60: Cormack et al. 2009, local_rag.RRF_K)
DENSE_WEIGHTS = (0.3, 0.4, 0.5, 0.6, 0.7)  # weight of the dense side in weighted RRF (0.5: plain RRF)
DEPTHS = (10, 20, 30, 50, 100)  # candidates per retriever (30: local_rag.CANDIDATE_K; the evaluation uses >= 100)
REFERENCE = ("german", 60, 0.5, 100)  # (bm25, rrf k, dense weight, depth): what the evaluation measured as 0.948
BM25_CHOICES = ("none", "fold", "german", "german+split")
FOLD_SEED = "i19-cv"  # the seed of the fold hash: sha256(seed:query id) decides each query's fold
CUTOFF = 10  # MRR@10, NDCG@10, Recall@10
UMLAUTS = str.maketrans({"ä": "a", "ö": "o", "ü": "u", "ß": "ss"})


def fold_of(query_id: str, seed: str = FOLD_SEED) -> int:
    """0 or 1: the query's fold, by the parity of sha256("seed:query id")."""
    return int(hashlib.sha256(f"{seed}:{query_id}".encode()).hexdigest(), 16) % 2


def tokenizer(choice: str, texts: Sequence[str]):
    """tokens(text) for a BM25 tokenization of BM25_CHOICES (the corpus `texts` give german+split's vocabulary)."""
    from localrag.search.bm25 import tokenize

    if choice == "none":
        return lambda text: tokenize(text)
    if choice == "fold":
        return lambda text: [t.translate(UMLAUTS) for t in tokenize(text)]
    if choice == "german":
        return lambda text: tokenize(text, "german")
    from localrag.search.bm25 import DECOMPOUND_STEMMERS, CompoundSplitter

    splitter = CompoundSplitter.from_texts(texts, DECOMPOUND_STEMMERS["german+decompound"][1])
    return lambda text: tokenize(text, "german+decompound", splitter)


def bm25_lists(chunk_ids: Sequence[str], texts: Sequence[str], questions: Sequence[str], choice: str,
               depth: int) -> list[list[str]]:
    """Each question's BM25 chunk list (`depth` deep, chunks sharing a token), tokenized by `choice`."""
    from localrag.search.bm25 import BM25Index, top_k

    tokens = tokenizer(choice, texts)
    index = BM25Index.build_from_tokens(list(chunk_ids), [tokens(t) for t in texts])
    lists = []
    for question in questions:
        scores, matched = index._score_and_match(tokens(question))
        lists.append([index.ids[i] for i in top_k(scores, matched, depth).tolist()])
    return lists


def fused_documents(dense: Sequence[str], bm25: Sequence[str], doc_of: Mapping[str, str], k: int, weight: float,
                    depth: int) -> dict[str, float]:
    """Weighted RRF of the first `depth` chunks of each list, collapsed to {document: its best chunk's score}."""
    scores: dict[str, float] = {}
    for ranking, w in ((dense[:depth], 2 * weight), (bm25[:depth], 2 * (1 - weight))):
        for rank, chunk in enumerate(ranking, start=1):
            scores[chunk] = scores.get(chunk, 0.0) + w / (k + rank)
    docs: dict[str, float] = {}
    for chunk, score in sorted(scores.items(), key=lambda item: -item[1]):
        docs.setdefault(doc_of[chunk], score)
    return docs


def query_scores(run: Mapping[str, float], qrels: Mapping[str, int]) -> tuple[float, float, float]:
    """(MRR@10, NDCG@10, Recall@10) of one query's {document: score}, ranked as trec_eval ranks a run."""
    from localrag.evaluation import metrics

    ranked = metrics.rank_run(run)
    return (metrics.reciprocal_rank(ranked[:CUTOFF], qrels), metrics.ndcg_at_k(ranked, qrels, CUTOFF),
            metrics.recall_at_k(ranked, qrels, CUTOFF))


def mean(values: Iterable[float]) -> float:
    values = list(values)
    return sum(values) / len(values) if values else float("nan")


def paired(reference: Mapping[str, float], other: Mapping[str, float], ids: Sequence[str]) -> tuple[float, float]:
    """(mean difference other - reference over `ids`, two-sided p of the paired randomization test)."""
    from localrag.evaluation.stats import paired_randomization_test

    old, new = {q: reference[q] for q in ids}, {q: other[q] for q in ids}
    return mean(new[q] - old[q] for q in ids), paired_randomization_test(old, new)


def label(config: tuple) -> str:
    bm25, k, weight, depth = config
    return f"bm25={bm25} rrf_k={k} dense_weight={weight} depth={depth}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=HelpFormatter)
    parser.add_argument("--dataset", required=True, help="BEIR folder")
    parser.add_argument("--split", default="test", help="qrels split")
    parser.add_argument("--index", required=True, help="the dataset index eval_retrieval.py built (eval/.cache/...)")
    parser.add_argument("--max-queries", type=int, default=None, help="the seeded query sample the index was built "
                                                                      "for (as eval_retrieval.py's flag)")
    parser.add_argument("--max-corpus-docs", type=int, default=None, help="as eval_retrieval.py's flag")
    parser.add_argument("--seed", type=int, default=0, help="dataset sampling seed, as eval_retrieval.py's")
    parser.add_argument("--bm25", nargs="+", default=list(BM25_CHOICES), choices=BM25_CHOICES,
                        help="BM25 tokenizations to try")
    parser.add_argument("--reference", default=",".join(map(str, REFERENCE)), metavar="BM25,K,WEIGHT,DEPTH",
                        help="the configuration every other is compared with")
    args = parser.parse_args(argv)
    from localrag.datasets import beir as beir_data
    from local_rag import LocalRAG

    bm25_ref, k_ref, w_ref, d_ref = args.reference.split(",")
    reference = (bm25_ref, int(k_ref), float(w_ref), int(d_ref))
    dataset = beir_data.load_beir(args.dataset, args.split)
    if args.max_queries or args.max_corpus_docs:
        dataset, _ = beir_data.sample_dataset(dataset, args.max_queries, args.max_corpus_docs, args.seed)
    queries = [q for q in dataset.queries.values() if any(g > 0 for g in dataset.qrels.get(q.query_id, {}).values())]
    ids = [q.query_id for q in queries]
    rag = LocalRAG(args.index, reranker_model=None, quiet=True)
    chunks = list(rag.index.indexed_chunks())
    chunk_ids, texts = [c[0] for c in chunks], [c[1] for c in chunks]
    doc_of = {c[0]: c[2].get("doc_id", c[2].get("source")) for c in chunks}
    depth = max(DEPTHS + (reference[3],))
    print(f"{len(queries)} queries, {len(chunks)} chunks of {len(set(doc_of.values()))} documents; dense model "
          f"{rag.index.settings['embedding_model']}; load average {' '.join(f'{x:.2f}' for x in __import__('os').getloadavg())}",
          flush=True)
    started = time.perf_counter()
    questions = [rag.prepare_query(q.question) for q in queries]
    rag.embed_queries(questions)
    dense = [[doc.id for doc, _ in rag.retriever._dense(question, depth)] for question in questions]
    print(f"dense lists: {time.perf_counter() - started:.0f} s", flush=True)
    bm25 = {}
    for choice in sorted(set(args.bm25) | {reference[0]}, key=BM25_CHOICES.index):
        started = time.perf_counter()
        bm25[choice] = bm25_lists(chunk_ids, texts, questions, choice, depth)
        print(f"BM25 {choice}: {time.perf_counter() - started:.0f} s", flush=True)
    qrels = [dataset.qrels[q] for q in ids]
    fold = {q: fold_of(q) for q in ids}
    folds = [[q for q in ids if fold[q] == f] for f in (0, 1)]
    print(f"folds: {len(folds[0])} / {len(folds[1])} queries (sha256 of '{FOLD_SEED}:query id', parity)\n")

    # Single-retriever rows: each list alone, cut at 100, as the evaluation's dense and bm25 modes.
    print(f"{'configuration':58s} {'MRR@10':>7s} {'NDCG@10':>7s} {'R@10':>6s}  {'fold0':>6s} {'fold1':>6s}")

    def row(name: str, per_query: list[tuple[float, float, float]]) -> None:
        by_id = dict(zip(ids, per_query))
        print(f"{name:58s} {mean(s[0] for s in per_query):7.4f} {mean(s[1] for s in per_query):7.4f} "
              f"{mean(s[2] for s in per_query):6.4f}  {mean(by_id[q][0] for q in folds[0]):6.4f} "
              f"{mean(by_id[q][0] for q in folds[1]):6.4f}")

    def alone(lists: list[list[str]]) -> list[tuple[float, float, float]]:
        out = []
        for chunk_list, rel in zip(lists, qrels):
            docs: dict[str, float] = {}
            for rank, chunk in enumerate(chunk_list, start=1):
                docs.setdefault(doc_of[chunk], 1.0 / rank)
            out.append(query_scores(docs, rel))
        return out

    row("dense alone", alone(dense))
    for choice, lists in bm25.items():
        row(f"bm25 alone ({choice})", alone(lists))
    configs = [reference] + [c for c in itertools.product(bm25, RRF_KS, DENSE_WEIGHTS, DEPTHS) if c != reference]
    started = time.perf_counter()
    results: dict[tuple, list[tuple[float, float, float]]] = {}
    for config in configs:
        choice, k, weight, cut = config
        results[config] = [query_scores(fused_documents(d, b, doc_of, k, weight, cut), rel)
                           for d, b, rel in zip(dense, bm25[choice], qrels)]
    print(f"({len(configs)} fusions scored in {time.perf_counter() - started:.0f} s)")
    row(f"reference: {label(reference)}", results[reference])
    mrr = {c: dict(zip(ids, (s[0] for s in r))) for c, r in results.items()}
    for choice in bm25:  # the published defaults with each tokenization
        c = (choice, 60, 0.5, 100)
        if c != reference:
            row(label(c), results[c])
    best_all = max(configs, key=lambda c: mean(mrr[c].values()))  # max keeps the first of equals: the reference
    row(f"in-sample best (NOT an estimate): {label(best_all)}", results[best_all])

    print("\n2-fold cross-validation (chosen by MRR@10 on one fold, reported on the other):")
    held_out: dict[str, float] = {}
    for chosen_on, report_on in ((0, 1), (1, 0)):
        fit = folds[chosen_on]
        best = max(configs, key=lambda c: mean(mrr[c][q] for q in fit))
        test = folds[report_on]
        diff, p = paired(mrr[reference], mrr[best], test)
        held_out.update({q: mrr[best][q] for q in test})
        print(f"  chosen on fold {chosen_on}: {label(best)} (fold {chosen_on} MRR@10 "
              f"{mean(mrr[best][q] for q in fit):.4f}); on fold {report_on}: {mean(mrr[best][q] for q in test):.4f} "
              f"vs reference {mean(mrr[reference][q] for q in test):.4f}, difference {diff:+.4f}, p = {p:.3f}")
    diff, p = paired(mrr[reference], held_out, ids)
    print(f"  both held-out folds together ({len(ids)} queries): MRR@10 {mean(held_out.values()):.4f} vs reference "
          f"{mean(mrr[reference].values()):.4f}, difference {diff:+.4f}, p = {p:.3f}")

    # Each axis alone, cross-validated: the other axes at the reference's values.
    print("\nOne axis at a time (others at the reference), 2-fold cross-validated:")
    for axis, values in (("bm25", list(bm25)), ("rrf_k", RRF_KS), ("dense_weight", DENSE_WEIGHTS), ("depth", DEPTHS)):
        position = ("bm25", "rrf_k", "dense_weight", "depth").index(axis)
        candidates = [tuple(v if i == position else reference[i] for i in range(4)) for v in values]
        candidates = [reference] + [c for c in candidates if c != reference]
        held: dict[str, float] = {}
        picks = []
        for chosen_on, report_on in ((0, 1), (1, 0)):
            best = max(candidates, key=lambda c: mean(mrr[c][q] for q in folds[chosen_on]))
            picks.append(best[position])
            held.update({q: mrr[best][q] for q in folds[report_on]})
        diff, p = paired(mrr[reference], held, ids)
        table = "  ".join(f"{c[position]}:{mean(mrr[c].values()):.4f}" for c in candidates)
        print(f"  {axis:12s} picks {picks[0]} (fold 0) / {picks[1]} (fold 1); held-out MRR@10 {mean(held.values()):.4f}"
              f" ({diff:+.4f}, p = {p:.3f})   all queries (in-sample): {table}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
