"""Long PDFs: which chunk text, BM25 tokenization and fusion find the right page of a 200-page filing.

Screens the choices of issue 31 on the FinanceBench filings and dev goldset without building a LocalRAG index
per choice: the pages are read once by localrag/text/pdf.py (cached), cut as the index cuts them
(`localrag.settings.text_splitter`), given either the file header the index wrote so far (``[file, page N]``) or
the context line of localrag/text/identity.py, embedded with the product's model (vectors cached per text list), and
searched exactly (cosine) and with BM25 (`localrag.search.bm25.BM25Index`, each tokenization). Lists are ranked by page
as the evaluation ranks them (each page once, by its best chunk; ±1 page counts, `localrag.goldset.format`), and for
each configuration the script prints page Hit@5 / Hit@10 / MRR@20 and file Hit@5 (is the right filing among the
first five pages at all).

Fusions: RRF (k), and the convex combination of min-max normalised scores (Bruch, Gai & Ingber, "An Analysis
of Fusion Functions for Hybrid Retrieval", ACM TOIS 2023), w * dense + (1 - w) * bm25 over each list's
candidates (a chunk missing from one list scores 0 there), then the document prior (localrag/text/identity.py: BM25
of the question over each file's identity line, the best file 1.0) times its weight, as `localrag.retrieval.retriever`
does. Both weights are chosen by 2-fold cross-validation (`bench/fusion_cv.py`'s seeded fold hash): the best
pair on one fold's questions (MRR) is scored on the other's, and the printed CV figure joins both held-out
halves. Nothing here decides a default; it says where to look. The
tool's own `--compare` on a built index gives the figures that do.

    python bench/long_pdf.py [--units 2000,page] [--headers file,context] [--bm25 plain,split] [--json FILE]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import pickle
import sys
import time
from pathlib import Path
from typing import Callable, Sequence

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
from localrag.cli import HelpFormatter  # noqa: E402 - the repository root is on sys.path above

DATA = REPO_ROOT.parent / "shared" / "data" / "financebench"
PDF_DIR = DATA / "pdfs"  # the 74 FinanceBench filings
GOLDSET = DATA / "goldset_dev.csv"  # 63 dev questions with their evidence pages
CACHE = Path(os.environ.get("LOCALRAG_CACHE", "~/.cache/localrag")).expanduser() / "bench" / "long_pdf"
DEPTH = 30  # candidates per list before fusion (local_rag.CANDIDATE_K)
KS = (5, 10)  # page Hit@k cutoffs printed; MRR is taken over the first 20 pages, as the report does
MRR_DEPTH = 20
RRF_KS = (1, 10, 60)  # RRF constants tried
WEIGHTS = (0.5, 0.6, 0.7, 0.8, 0.9, 1.0)  # dense weights of the convex combination (below 0.5 lost everywhere)
PRIOR_WEIGHTS = (0.0, 0.3, 0.5, 0.8, 1.0, 1.5)  # weights of the document prior


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def read_shelf(pdf_dir: Path, loader: str) -> dict[str, tuple[str, object]]:
    """file name -> (metadata title, ExtractedPdf), read once and cached by the folder's names and sizes."""
    import pypdfium2

    from localrag.text import pdf

    paths = sorted(pdf_dir.glob("*.pdf"))
    key = hashlib.sha256(repr([(p.name, p.stat().st_size) for p in paths] + [loader, pdf.TEXT_RULES]).encode())
    cached = CACHE / f"pages-{key.hexdigest()[:16]}.pkl"
    if cached.exists():
        return pickle.loads(cached.read_bytes())
    log(f"reading {len(paths)} PDFs with {loader}")
    shelf = {}
    for path, extracted in zip(paths, pdf.iter_extracted(paths, loader, 2)):
        document = pypdfium2.PdfDocument(str(path))
        try:
            title = document.get_metadata_dict().get("Title", "")
        finally:
            document.close()
        shelf[path.name] = (title, extracted)
    CACHE.mkdir(parents=True, exist_ok=True)
    cached.write_bytes(pickle.dumps(shelf))
    return shelf


def cut(shelf: dict, unit: str, header: str) -> tuple[list[tuple[str, int]], list[str]]:
    """(page key of each chunk, its indexed text) for a chunk size (or "page") and a header kind."""
    from localrag.text import identity as context
    from localrag.settings import parse_chunk_size, text_splitter
    from localrag.text.pages import chunk_header
    from localrag.text.pdf import front_page, sections_by_page

    splitter = text_splitter({"chunk_size": parse_chunk_size(unit), "chunk_overlap": 200, "page_chunk_limit": 8000})
    keys, texts = [], []
    for source, (title, extracted) in sorted(shelf.items()):
        identity = context.document_context(source, title, front_page(extracted))
        sections = sections_by_page(extracted.outline, [page for page, _, _ in extracted.pages])
        for page, _, text in extracted.pages:
            for piece in splitter.split_text(text) if text.strip() else []:
                line = chunk_header(source, page)
                if header == "context":
                    line = line[:-1] + " " + context.chunk_context(identity, sections.get(page)) + "\n"
                elif header == "none":
                    line = ""
                keys.append((source, page))
                texts.append(line + piece)
    return keys, texts


def embed(texts: Sequence[str], model: str, backend: str):
    """Unit vectors of `texts` by the product's embedding model, cached by the texts' digest."""
    import numpy

    digest = hashlib.sha256("\0".join([model, backend, *texts]).encode()).hexdigest()[:16]
    cached = CACHE / f"vectors-{digest}.npy"
    if cached.exists():
        return numpy.load(cached)
    import local_rag

    embedder = local_rag.load_embeddings(model, backend)
    started = time.perf_counter()
    vectors = []
    batch = 256
    for start in range(0, len(texts), batch):
        vectors.extend(embedder.embed_documents(list(texts[start:start + batch])))
        done = min(start + batch, len(texts))
        rate = done / (time.perf_counter() - started)
        log(f"  embedded {done}/{len(texts)} ({rate:.1f}/s)")
    matrix = numpy.asarray(vectors, dtype=numpy.float32)
    matrix /= numpy.maximum(numpy.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
    CACHE.mkdir(parents=True, exist_ok=True)
    numpy.save(cached, matrix)
    return matrix


def dense_lists(matrix, queries: Sequence[str], model: str, backend: str, depth: int) -> list[list[tuple[int, float]]]:
    import numpy

    import local_rag
    from localrag.models import loading

    vectors = numpy.asarray(loading.embed_queries(local_rag.load_embeddings(model, backend), list(queries)),
                            dtype=numpy.float32)
    vectors /= numpy.linalg.norm(vectors, axis=1, keepdims=True)
    out = []
    for similarities in vectors @ matrix.T:
        top = numpy.argsort(-similarities, kind="stable")[:depth]
        out.append([(int(i), float(similarities[i])) for i in top])
    return out


def split_tokens(text: str, stemmer: str = "none") -> list[str]:
    """The BM25 tokenization with words split at underscores and letter-digit words followed by their runs."""
    from localrag.search.bm25 import tokenize

    return tokenize(text, stemmer, split_joined=True)


def bm25_lists(texts: Sequence[str], queries: Sequence[str], tokens: Callable[[str], list[str]],
               depth: int) -> list[list[tuple[int, float]]]:
    from localrag.search.bm25 import BM25Index, top_k

    index = BM25Index.build_from_tokens([str(i) for i in range(len(texts))], [tokens(t) for t in texts])
    out = []
    for query in queries:
        scores, matched = index._score_and_match(tokens(query))
        out.append([(int(i), float(scores[i])) for i in top_k(scores, matched, depth).tolist()])
    return out


def convex(dense: Sequence[tuple[int, float]], bm25: Sequence[tuple[int, float]], weight: float,
           prior: dict[str, float], prior_weight: float, keys: Sequence[tuple[str, int]]) -> list[int]:
    """localrag.search.fusion's convex fusion of both lists, then the document prior, as the retriever does it."""
    from localrag.search.fusion import convex_fuse, with_document_prior

    fused = convex_fuse([(str(i), s) for i, s in dense], [(str(i), s) for i, s in bm25], weight)
    if prior and prior_weight > 0:
        fused = with_document_prior(fused, lambda i: keys[int(i)][0], prior, prior_weight)
    return [int(i) for i, _ in fused]


def priors(shelf: dict, queries: Sequence[str]) -> list[dict[str, float]]:
    """Each question's document prior over the shelf's identity lines (localrag/text/identity.py), as the index
    records them."""
    from localrag.text import identity as context
    from localrag.text.pdf import front_page

    identities = {}
    for source, (title, extracted) in shelf.items():
        identities[source] = context.document_context(source, title, front_page(extracted))
    index = context.identity_index(identities)
    return [context.document_prior(index, query) for query in queries]


def rrf(dense: Sequence[tuple[int, float]], bm25: Sequence[tuple[int, float]], k: int) -> list[int]:
    from localrag.search.fusion import rrf_fuse

    return [int(i) for i, _ in rrf_fuse([[str(i) for i, _ in dense], [str(i) for i, _ in bm25]], k)]


def page_rank(order: Sequence[int], keys: Sequence[tuple[str, int]], locations) -> tuple[int | None, bool]:
    """(1-based page rank of the first acceptable page within MRR_DEPTH pages, right file among the first 5)."""
    from localrag.goldset import format as gs
    from localrag.search.fusion import first_per_key

    pages = [keys[i] for i, _ in first_per_key([(i, 0.0) for i in order], lambda i: keys[i])][:MRR_DEPTH]
    rank = gs.first_match_rank([(source, [page]) for source, page in pages], locations)
    right_file = any(gs.same_file(source, loc.source) for source, _ in pages[:5] for loc in locations)
    return rank, right_file


def scores(ranks: Sequence[tuple[int | None, bool]]) -> dict[str, float]:
    n = len(ranks) or 1
    out = {f"hit@{k}": sum(1 for r, _ in ranks if r is not None and r <= k) / n for k in KS}
    out["mrr"] = sum(1.0 / r for r, _ in ranks if r is not None) / n
    out["file@5"] = sum(1 for _, f in ranks if f) / n
    return out


def cross_validated(grid: dict, folds: Sequence[int]) -> tuple[list, list]:
    """(each question's ranks under the configuration chosen on the other fold, the two choices): the choice is
    the best MRR on a fold's complement; equal MRRs take the larger weights (the later key)."""
    held_out: list = [None] * len(folds)
    chosen = []
    for fold in (0, 1):
        train = [i for i, f in enumerate(folds) if f != fold]
        best = max(grid, key=lambda c: (sum(1.0 / grid[c][i][0] for i in train if grid[c][i][0]), c))
        chosen.append(best)
        for i, f in enumerate(folds):
            if f == fold:
                held_out[i] = grid[best][i]
    return held_out, chosen


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=HelpFormatter)
    parser.add_argument("--units", default="2000,page", help="chunk sizes to try, comma-separated ('page': whole)")
    parser.add_argument("--headers", default="file,context", help="chunk headers to try: file, context, none")
    parser.add_argument("--bm25", default="plain,split", help="BM25 tokenizations: plain (today's), split")
    parser.add_argument("--model", default="all-MiniLM-L6-v2", help="embedding model")
    parser.add_argument("--backend", default="torch", help="embedding backend")
    parser.add_argument("--json", help="also write the results here")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from fusion_cv import fold_of

    from localrag.goldset import format as gs
    from localrag.search.bm25 import tokenize

    if not PDF_DIR.is_dir():
        print(f"error: {PDF_DIR} not found (the shared FinanceBench data)", file=sys.stderr)
        return 2
    questions = gs.read_goldset(GOLDSET).questions
    queries = [q.question for q in questions]
    folds = [fold_of(q.query_id) for q in questions]
    shelf = read_shelf(PDF_DIR, "pypdfium2")
    prior_of = priors(shelf, queries)
    tokenizers = {"plain": tokenize, "split": split_tokens}
    rows = []
    for unit in args.units.split(","):
        for header in args.headers.split(","):
            keys, texts = cut(shelf, unit, header)
            log(f"{unit} / {header}: {len(texts)} chunks")
            matrix = embed(texts, args.model, args.backend)
            dense = dense_lists(matrix, queries, args.model, args.backend, DEPTH)

            def ranked(orders: Sequence[Sequence[int]]) -> list[tuple[int | None, bool]]:
                return [page_rank(order, keys, q.locations) for order, q in zip(orders, questions)]

            rows.append((unit, header, "-", "dense", scores(ranked([[i for i, _ in d] for d in dense]))))
            for name in args.bm25.split(","):
                bm25 = bm25_lists(texts, queries, tokenizers[name], DEPTH)
                rows.append((unit, header, name, "bm25", scores(ranked([[i for i, _ in b] for b in bm25]))))
                for k in RRF_KS:
                    rows.append((unit, header, name, f"rrf k={k}",
                                 scores(ranked([rrf(d, b, k) for d, b in zip(dense, bm25)]))))
                grid = {(w, p): ranked([convex(d, b, w, prior, p, keys) for d, b, prior in zip(dense, bm25, prior_of)])
                        for w in WEIGHTS for p in PRIOR_WEIGHTS}
                for (w, p), found in grid.items():
                    rows.append((unit, header, name, f"convex w={w} prior={p}", scores(found)))
                held_out, chosen = cross_validated(grid, folds)
                rows.append((unit, header, name, f"convex CV ({chosen[0]} / {chosen[1]})", scores(held_out)))
    print(f"FinanceBench dev, {len(questions)} questions; pages ranked by best chunk, ±1 page; MRR over 20 pages")
    print(f"{'units':>6} {'header':>8} {'bm25':>6} {'ranking':<26} {'hit@5':>6} {'hit@10':>6} {'mrr':>6} {'file@5':>6}")
    for unit, header, name, ranking, s in rows:
        print(f"{unit:>6} {header:>8} {name:>6} {ranking:<26} {s['hit@5']:6.3f} {s['hit@10']:6.3f} "
              f"{s['mrr']:6.3f} {s['file@5']:6.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps([dict(zip(("units", "header", "bm25", "ranking"), r[:4]), **r[4])
                                               for r in rows], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
