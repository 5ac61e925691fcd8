"""The evaluation scores the list the chat gets: for every question of a goldset and of a BEIR dataset, in every
mode, with and without a reranker, ranked by page and by chunk, the evaluation's scored list is
`LocalRAG.retrieve(question, k)` called through the public API, and the report states one candidate depth.

The dataset below (`write_dataset`) has 8 long documents about rivers (7 chunks each at the 200-character chunks
its index uses: 56 chunks) and 16 short ones of one chunk each: 24 documents, 72 chunks. At the cutoffs 1, 5, 10
every query asks retrieve for k = 10 documents x 72/24 chunks per document x 1.5 = 45 (evaluate.dataset_k), so
each retriever contributes max(45, CANDIDATE_K 30) = 45 candidates. q6 names the eight rivers: its 45 best
chunks in every list are river chunks, 8 documents, fewer than 10. The evaluation once asked again for such a
query with twice the k and fused 90-deep lists that no chat sees (its run file then differed from retrieve's list
in every mode); now q6 is scored on its 8 documents, and the report says so.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import eval_retrieval as er
import local_rag
from conftest import TINY_GOLD
from local_rag import LocalRAG
from localrag.datasets import beir
from localrag.evaluation import scoring as ev

CHUNK_SIZE, CHUNK_OVERLAP = 200, 20
RIVERS = ["Rhine", "Danube", "Elbe", "Loire", "Thames", "Vistula", "Rhone", "Oder"]
RIVER_SENTENCES = [
    "The {r} carries melt water from the mountains down to the lowlands in spring, and its level rises quickly.",
    "Barges on the {r} move grain, coal and gravel between river ports; locks keep the channel deep enough.",
    "Floods on the {r} are held back by dykes, polders and meadows that are allowed to fill with water.",
    "Fish such as salmon and eel returned to the {r} once the towns along its banks began to clean their sewage.",
    "Bridges across the {r} were rebuilt after the war, and ferries still cross it where no bridge stands.",
    "In dry summers the {r} runs low, boats load less cargo, and the water warms until the fish suffer.",
    "Old mills along the {r} once ground flour; some of them now turn turbines that make electricity.",
    "The delta of the {r} is a maze of channels, sand banks and reed beds where many birds nest.",
    "Painters loved the light on the {r} at dusk, and its bends appear in many landscapes of the last century.",
    "The source of the {r} lies in a spring high up, where a small stone marks the start of the long journey.",
    "Treaties divide the {r} between the countries it crosses, and a commission shares out its water.",
]
SHORT = {
    "s01": ("Coffee", "A cup of brewed coffee holds about ninety milligrams of caffeine."),
    "s02": ("Tea", "Green tea holds less caffeine than coffee, around thirty milligrams a cup."),
    "s03": ("Chess", "The Sicilian Defence is a popular chess opening for black."),
    "s04": ("Jazz", "Jazz began in New Orleans; Louis Armstrong made the trumpet solo central."),
    "s05": ("Volcanoes", "Explosive eruptions throw ash high into the sky and can cool the climate."),
    "s06": ("Bees", "Honey bees collect nectar from flowers and turn it into honey in the hive."),
    "s07": ("Bicycles", "To fix a flat tyre, find the hole in the inner tube and patch it."),
    "s08": ("Glaciers", "Mountain glaciers shrink as the air warms, and their melt water feeds rivers."),
    "s09": ("Canals", "A canal lock lifts a boat by filling a chamber with water from the higher reach."),
    "s10": ("Bread", "Sourdough bread rises slowly because wild yeast works more slowly than baker's yeast."),
    "s11": ("Telescopes", "A reflecting telescope gathers light with a curved mirror instead of a lens."),
    "s12": ("Harbours", "Sea ports dredge their channels so that large ships can reach the quays."),
    "s13": ("Rain", "Heavy rain over several days saturates the soil, and streams overflow their banks."),
    "s14": ("Salmon", "Salmon swim upstream to the gravel beds where they were born in order to spawn."),
    "s15": ("Violins", "A violin's sound depends on the wood of its top plate and the varnish."),
    "s16": ("Bridges", "A suspension bridge hangs its deck from cables slung between two towers."),
}
QUERIES = {
    "q1": "How are floods on a river held back?",
    "q2": "Which goods do barges carry between river ports?",
    "q3": "Why did salmon come back to the river?",
    "q4": "How much caffeine is in a cup of coffee?",
    "q5": "How does a canal lock lift a boat?",
    "q6": "Which of the Rhine, Danube, Elbe, Loire, Thames, Vistula, Rhone and Oder has the longest delta?",
}
QRELS = "query-id\tcorpus-id\tscore\nq1\tr03\t1\nq2\tr02\t1\nq3\tr04\t1\nq3\ts14\t1\nq4\ts01\t1\nq5\ts09\t1\nq6\tr02\t1\n"
DEPTH, STATED_K, CANDIDATES = 10, 45, 45  # the cutoffs 1, 5, 10; see the module docstring


def write_dataset(folder: Path) -> Path:
    """The BEIR folder of the module docstring."""
    documents = {f"r{n:02d}": (river, " ".join(s.format(r=river) for s in RIVER_SENTENCES))
                 for n, river in enumerate(RIVERS, start=1)}
    documents.update(SHORT)
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": d, "title": t, "text": x}) + "\n"
                                                 for d, (t, x) in documents.items()), encoding="utf-8")
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n"
                                                  for q, t in QUERIES.items()), encoding="utf-8")
    (folder / "qrels" / "test.tsv").write_text(QRELS, encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def rivers(tmp_path_factory) -> tuple[Path, Path]:
    """(BEIR folder, its index at 200-character chunks), built once."""
    base = tmp_path_factory.mktemp("rivers")
    folder = write_dataset(base / "ds")
    rag = LocalRAG(base / "index", reranker_model=None, chunk_size=CHUNK_SIZE, chunk_overlap=CHUNK_OVERLAP,
                   quiet=True)
    rag.sync_records([{"doc_id": d.doc_id, "title": d.title, "text": d.text, "metadata": d.metadata}
                      for d in beir.load_beir(folder).documents.values()], progress=False)
    return folder, base / "index"


def config_value(report: str, label: str) -> str:
    """The value of a configuration line of a text report."""
    return next(line.split(":", 1)[1].strip() for line in report.splitlines() if line.startswith(f"  {label}:"))


def test_the_dataset_is_as_described(rivers):
    _, index = rivers
    assert LocalRAG(index, reranker_model=None, quiet=True).info["counts"] == {"files": 24, "pages": 24,
                                                                              "chunks": 72}
    assert ev.dataset_k({"files": 24, "chunks": 72}, DEPTH) == STATED_K


@pytest.mark.parametrize("rank_by", local_rag.RANK_UNITS)
@pytest.mark.parametrize("rerank", [False, True])
@pytest.mark.parametrize("mode", local_rag.RETRIEVAL_MODES)
def test_dataset_run_scores_what_retrieve_returns(rivers, spread_cross_encoder, tmp_path, mode, rerank, rank_by):
    """The run file holds, per query, the first 10 documents of retrieve(query, k) for the k the report states,
    and the report states one candidate depth: in its configuration and in "Where the misses are lost"."""
    folder, index = rivers
    flags = ["--rerank-model", str(spread_cross_encoder)] if rerank else ["--no-rerank"]
    code = er.main(["--dataset", str(folder), "--index", str(index), "--k", "1,5,10", "--quiet", "--no-compare",
                    "--mode", mode, "--rank-by", rank_by, *flags, "--report", str(tmp_path / "r.txt"),
                    "--run-file", str(tmp_path / "r.run")])
    assert code == 0
    report = (tmp_path / "r.txt").read_text(encoding="utf-8")
    asked = re.search(r"each query's list is retrieve\(query, k=(\d+)\)", config_value(report, "Scoring"))
    assert asked and int(asked.group(1)) == STATED_K
    assert config_value(report, "Retrieval mode").startswith(f"{mode} ({CANDIDATES} candidates per retriever")
    assert f"among the candidates ({CANDIDATES} chunks per retriever" in report
    payload = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert {q["stages"]["pool"] for q in payload["per_query"]} == {CANDIDATES}
    short = sorted(qid for qid, scores in beir.read_trec_run(tmp_path / "r.run").items() if len(scores) < DEPTH)
    if rank_by == "page" or not rerank:  # a reranked chunk list cut at 45 may reach beyond the 8 river documents
        assert short == ["q6"]
    assert (f"{len(short)} of 6 queries got fewer than 10 documents: the candidate lists of retrieve(query, k=45) "
            f"held no more; they are scored on the documents that came back") in payload["messages"]
    run = beir.read_trec_run(tmp_path / "r.run")
    rag = LocalRAG(index, reranker_model=str(spread_cross_encoder) if rerank else None, rank_by=rank_by, quiet=True)
    queries = beir.load_beir(folder).queries
    assert sorted(run) == sorted(QUERIES)
    for qid, scores in run.items():
        returned = rag.retrieve(queries[qid].question, k=STATED_K, mode=mode, rerank=rerank)
        expected = ev.collapse_to_documents(returned, DEPTH)
        ranked = sorted(scores, key=lambda d: -scores[d])
        assert ranked == list(expected), (mode, rerank, rank_by, qid)
        # The evaluation embeds its questions in one batch, retrieve one by one: cosines agree to float32 noise.
        assert [scores[d] for d in ranked] == pytest.approx(list(expected.values()), abs=1e-6)


@pytest.mark.parametrize("cutoffs, k, candidates", [(None, 20, 30), ("5,40", 40, 40)])
@pytest.mark.parametrize("rank_by", local_rag.RANK_UNITS)
def test_goldset_run_scores_what_retrieve_returns(tiny_index, spread_cross_encoder, tmp_path, rank_by, cutoffs, k,
                                                  candidates):
    """Every row of a goldset ablation (4 modes, with and without a reranker): each question's first passages
    and rank in the JSON report are those of retrieve(question, k) for k = the deepest cutoff (20 by default),
    and the candidates per retriever the report states are max(k, CANDIDATE_K 30), the stage ranks' pool."""
    from localrag.goldset import format as gs

    docs, index = tiny_index
    gold = tmp_path / "gold.csv"
    gold.write_text(TINY_GOLD, encoding="utf-8")
    base = tmp_path / "abl.txt"
    code = er.main(["--goldset", str(gold), "--docs", str(docs), "--index", str(index), "--ablation", "--quiet",
                    "--no-compare", "--rank-by", rank_by, "--rerank-model", str(spread_cross_encoder),
                    *(["--k", cutoffs] if cutoffs else []), "--report", str(base)])
    assert code == 1  # scans.pdf is not indexed: degraded
    rag = LocalRAG(index, reranker_model=str(spread_cross_encoder), rank_by=rank_by, quiet=True)
    questions = {q.query_id: q for q in gs.read_goldset(gold).questions}
    rows = 0
    for mode in local_rag.RETRIEVAL_MODES:
        for rerank in (False, True):
            row = base.with_name(f"abl-{ev.config_name(mode, rerank).replace(' + ', '-')}")
            report = row.with_suffix(".txt").read_text(encoding="utf-8")
            assert config_value(report, "Retrieval mode").startswith(f"{mode} ({candidates} candidates per retriever")
            payload = json.loads(row.with_suffix(".json").read_text(encoding="utf-8"))
            for q in payload["per_query"]:
                returned = rag.retrieve(q["question"], k=k, mode=mode, rerank=rerank)
                top = returned[:ev.TOP_IN_JSON]
                assert [(t["source"], t["page"]) for t in q["top"]] == [
                    (d.metadata["source"], int(d.metadata["page"]) + 1) for d, _ in top], (mode, rerank, rank_by)
                # Embedded and reranked in other batches than here: scores agree to float32 noise (and rounding).
                assert [t["score"] for t in q["top"]] == pytest.approx([s for _, s in top], abs=1e-5)
                rank = gs.first_match_rank([(d.metadata["source"], [int(d.metadata["page"])]) for d, _ in returned],
                                           questions[q["query_id"]].locations, page_offset=1, tolerance=1)
                assert q["rank"] == rank, (mode, rerank, rank_by, q["question"])
                assert q["stages"]["pool"] == candidates
            rows += 1
    assert rows == 8


def test_retrieve_is_the_traced_retrieval(tiny_index, monkeypatch):
    """retrieve is retrieve_traced's final list (one code path, so the evaluation's trace cannot drift from what the
    chat gets), and the candidates per retriever are max(k, candidate_k)."""
    from localrag.retrieval.retriever import Retriever

    _, index = tiny_index
    rag = LocalRAG(index, reranker_model=None, quiet=True, candidate_k=3)
    assert [rag.candidate_depth(k) for k in (1, 3, 4, 40)] == [3, 3, 4, 40]
    traced = Retriever.retrieve_traced
    calls = []

    def recording(self, query, k, mode=None, rerank=None, depth=0):
        calls.append((query, k, mode, rerank, depth))
        trace = traced(self, query, k, mode, rerank, depth)
        assert trace.pool == self.candidate_depth(k)
        calls.append(trace.final)
        return trace

    monkeypatch.setattr(Retriever, "retrieve_traced", recording)
    hits = rag.retrieve("What is vega?", k=2, mode="hybrid", rerank=False)
    assert calls == [("What is vega?", 2, "hybrid", False, 0), hits]


def test_a_goldset_run_holds_one_document_per_chunk(tiny_index):
    # Issue 52: each question's passages were Documents of their own; 20,000 questions of 20 held 400,000 (15 KB a
    # question). The run's lists are what retrieve returns, each chunk one object across questions.
    from localrag.goldset import format as gs

    _, index = tiny_index
    rag = LocalRAG(index, reranker_model=None, quiet=True)
    questions = [gs.GoldQuestion(gs.query_id(text), text, None, (gs.Location("options.pdf", 1),), "", (n,))
                 for n, text in enumerate(["What is vega?", "How do crops react to rainfall?", "What is vega here?"])]
    hits, traced = ev.retrieve_goldset(rag, questions, ev.Scoring((1, 5), 1, 1, diagnostic_depth=10), "hybrid",
                                       False, progress=False)
    for q in questions:
        expected = rag.retrieve(q.question, k=5, mode="hybrid", rerank=False)
        assert [(d.id, d.page_content, d.metadata, score) for d, score in hits[q.query_id]] == \
            [(d.id, d.page_content, d.metadata, score) for d, score in expected]
    by_id: dict = {}
    for hit in [h for q in questions for h in hits[q.query_id]] + [t.gold[2] for t in traced.values() if t.gold]:
        assert by_id.setdefault(hit[0].id, hit[0]) is hit[0]
    assert len(by_id) < sum(len(found) for found in hits.values())  # the questions share chunks


@pytest.mark.parametrize("cutoffs, candidates", [(None, 30), ("5,40", 40)])
def test_explain_states_the_candidates_of_its_k(tiny_index, tmp_path, capsys, cutoffs, candidates):
    docs, index = tiny_index
    gold = tmp_path / "gold.csv"
    gold.write_text(TINY_GOLD, encoding="utf-8")
    assert er.main(["--goldset", str(gold), "--docs", str(docs), "--index", str(index), "--no-sync", "--quiet",
                    "--mode", "dense", "--no-rerank", *(["--k", cutoffs] if cutoffs else []),
                    "--explain", "What is vega?"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.endswith(f"cosine similarity (dense), dense mode, {candidates} candidates per retriever, lists "
                          f"searched 100 deep")
