"""localrag/search/ivf.py: the approximate dense search of shelves past exact search's reach.

Probing every list gives exact search's list (vectors.top_k_cosine), ties included; a build is a function of the
vectors and the seed; a saved IVF is used only for the chunks it was built from.
"""
from __future__ import annotations

import numpy
import pytest

from localrag.search import ivf
from localrag.search.vectors import top_k_cosine


def unit_rows(n: int, d: int = 16, seed: int = 0, clusters: int = 8) -> numpy.ndarray:
    rng = numpy.random.default_rng(seed)
    centres = rng.standard_normal((clusters, d))
    rows = centres[rng.integers(0, clusters, n)] + 0.3 * rng.standard_normal((n, d))
    rows = rows.astype(numpy.float32)
    return rows / numpy.linalg.norm(rows, axis=1, keepdims=True)


def test_probing_every_list_is_exact_search_ties_included():
    matrix = unit_rows(600)
    matrix[17] = matrix[401] = matrix[250]  # the trap: three equal rows, which the row rule orders 17, 250, 401
    index = ivf.build(matrix, lists=12, seed=3)
    assert sorted(index.order.tolist()) == list(range(600)) and index.offsets[-1] == 600
    for query in (matrix[250], matrix[5], -matrix[99]):
        found, exact = ivf.search(index, matrix, query, 50, probes=12), top_k_cosine(matrix, query, 50)
        # The same rows; a similarity may differ in float32's last place (one block's product against the whole).
        assert [r for r, _ in found] == [r for r, _ in exact]
        assert [s for _, s in found] == pytest.approx([s for _, s in exact], abs=1e-6)
    first = [row for row, _ in ivf.search(index, matrix, matrix[250], 3, probes=12)]
    assert first == [17, 250, 401]


def test_a_build_depends_only_on_the_vectors_and_the_seed():
    matrix = unit_rows(500)
    a, b, c = ivf.build(matrix, 10, seed=1), ivf.build(matrix.copy(), 10, seed=1), ivf.build(matrix, 10, seed=2)
    assert numpy.array_equal(a.centroids, b.centroids) and numpy.array_equal(a.order, b.order)
    assert not numpy.array_equal(a.centroids, c.centroids)
    with pytest.raises(ValueError, match="between 1 and 500 lists for 500 vectors, got 501"):
        ivf.build(matrix, 501)


def test_few_probes_find_most_of_the_exact_list_on_clustered_vectors():
    matrix = unit_rows(4000, clusters=20)
    index = ivf.build(matrix, ivf.default_lists(4000), seed=0)
    assert index.lists == 253
    queries = unit_rows(30, seed=9, clusters=20)
    exact = [[r for r, _ in top_k_cosine(matrix, q, 20)] for q in queries]
    approx = [[r for r, _ in ivf.search(index, matrix, q, 20, probes=40)] for q in queries]
    assert 0.9 < ivf.recall(exact, approx) <= 1.0
    few = [[r for r, _ in ivf.search(index, matrix, q, 20, probes=1)] for q in queries]
    assert ivf.recall(exact, few) < ivf.recall(exact, approx)


def test_recall_by_hand():
    # 2 of 3 found, then 3 of 3; the empty exact list is left out: (2/3 + 1) / 2.
    assert ivf.recall([["a", "b", "c"], ["x", "y", "z"], []], [["a", "c", "q"], ["z", "y", "x"], ["n"]]) == \
        pytest.approx(5 / 6)
    assert ivf.recall([], []) == 1.0
    assert [ivf.default_lists(n) for n in (1, 3, 100, 1_000_000)] == [1, 3, 40, 4000]


def test_a_saved_ivf_is_used_only_for_the_chunks_it_was_built_from(tmp_path):
    matrix = unit_rows(300)
    index = ivf.build(matrix, 6, seed=0)
    ivf.save(index, tmp_path, "fp-1")
    loaded = ivf.load(tmp_path, "fp-1", 300)
    assert loaded is not None and numpy.array_equal(loaded.order, index.order) and loaded.seed == 0
    assert ivf.is_current(tmp_path, "fp-1", 300)
    assert ivf.load(tmp_path, "fp-2", 300) is None and not ivf.is_current(tmp_path, "fp-2", 300)  # other chunks
    assert ivf.load(tmp_path, "fp-1", 299) is None and not ivf.is_current(tmp_path, "fp-1", 299)
    assert not ivf.is_current(tmp_path / "missing", "fp-1", 300) and ivf.load(tmp_path / "missing", "fp-1", 300) is None


@pytest.mark.parametrize("damage, why", [
    (lambda data: b"", "EOFError: No data left in file"),
    (lambda data: data[:len(data) // 2], "BadZipFile: File is not a zip file"),
    (lambda data: b"not a zip", "ValueError: "),  # numpy's words follow (they differ between its versions)
])
def test_an_unreadable_ivf_file_is_an_unreadable_ivf_not_a_traceback(tmp_path, damage, why):
    """Empty (EOFError) or truncated (zipfile.BadZipFile) escaped is_current and load; both now say which file and
    why, and the caller decides (a sync builds it again, a read refuses)."""
    ivf.save(ivf.build(unit_rows(300), 6, seed=0), tmp_path, "fp-1")
    path = tmp_path / ivf.IVF_FILE
    path.write_bytes(damage(path.read_bytes()))
    for read in (ivf.is_current, ivf.load):
        with pytest.raises(ivf.UnreadableIVF) as caught:
            read(tmp_path, "fp-1", 300)
        assert str(caught.value).startswith(f"{path} cannot be read ({why}") and str(caught.value).endswith(")")
        assert caught.value.path == path and caught.value.why.startswith(why)
    assert str(caught.value) == f"{path} cannot be read ({caught.value.why})"


def test_bad_ivf_settings_are_refused_before_the_index_is_opened(tmp_path):
    from local_rag import LocalRAG, RAGError

    for name, value, least in (("ivf_min_chunks", 0, 1), ("ivf_lists", -1, 0), ("ivf_probes", 2.5, 0),
                               ("ivf_probes", True, 0)):
        with pytest.raises(RAGError, match=rf"^{name} must be a whole number of at least {least}, got {value!r}$"):
            LocalRAG(tmp_path / "index", reranker_model=None, quiet=True, **{name: value})
    assert not (tmp_path / "index").exists()


@pytest.fixture
def ivf_shelf(tiny_index, tmp_path):
    """(docs, index) copies of the tiny index, given an IVF (ivf_min_chunks=1: the sync builds it, embeds nothing)."""
    import shutil

    from local_rag import LocalRAG

    docs, index = shutil.copytree(tiny_index[0], tmp_path / "docs"), shutil.copytree(tiny_index[1], tmp_path / "index")
    LocalRAG(index, reranker_model=None, quiet=True, ivf_min_chunks=1).sync([docs], progress=False)
    assert (index / ivf.IVF_FILE).exists()
    return docs, index


@pytest.mark.parametrize("damage, why", [(lambda data: b"", "EOFError: No data left in file"),
                                         (lambda data: data[:len(data) // 2], "BadZipFile: File is not a zip file")])
def test_a_damaged_ivf_file_is_refused_by_a_read_and_built_again_by_a_sync(ivf_shelf, capsys, damage, why):
    """A read never switches to exact search unasked (the report would say approximate while measuring exact); the
    sync that should repair the file died in ivf.is_current, so only deleting it by hand got out."""
    from local_rag import LocalRAG, RAGError

    docs, index = ivf_shelf
    path = index / ivf.IVF_FILE
    before = LocalRAG(index, reranker_model=None, quiet=True)
    searched, expected = before.index.dense_search(), before.retrieve("What is vega?", k=3)
    assert searched["method"] == "ivf"
    path.write_bytes(damage(path.read_bytes()))
    rag = LocalRAG(index, reranker_model=None, quiet=True)
    message = (f"the IVF file {path} of the index {index} cannot be read ({why}); run `add_pdfs.py --index {index}`: "
               f"a sync builds it again")
    for read in (lambda: rag.retrieve("What is vega?", k=3), rag.index.dense_search):
        with pytest.raises(RAGError) as caught:
            read()
        assert str(caught.value) == message
    capsys.readouterr()
    LocalRAG(index, reranker_model=None, quiet=True).sync([docs], progress=False)
    assert capsys.readouterr().err == f"warning: the IVF file {path} cannot be read ({why}); building it again\n"
    after = LocalRAG(index, reranker_model=None, quiet=True)
    assert (after.index.dense_search(), after.retrieve("What is vega?", k=3)) == (searched, expected)
