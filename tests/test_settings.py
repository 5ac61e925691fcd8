"""The settings as values (localrag/settings.py): one list of names from which the index's checks, the flags, the
sweep axes and the profiles are derived, and LocalRAG's two ways of taking them (values, or the older keywords)."""
from __future__ import annotations

import dataclasses

import pytest

import add_pdfs
import eval_retrieval
import local_rag
from localrag import settings
from localrag.errors import RAGError
from localrag.settings import IndexSettings, RetrievalSettings


def test_the_derived_lists_are_the_ones_the_index_always_had():
    # Order matters: the manifest, the rebuild reasons and the JSON report list settings in it.
    assert settings.REBUILD_SETTINGS == ("embedding_model", "embedding_backend", "chunk_size", "chunk_overlap",
                                         "pdf_loader", "chunk_headers", "chunk_context")
    assert settings.BM25_SETTINGS == ("bm25_stemmer",)
    assert settings.PAGE_SETTINGS == ("page_chunk_limit",)
    assert settings.UNRECORDED_SETTINGS == {"chunk_context": False}
    # The sweep's axes and report names list them in this order; the flags in another (both as before).
    assert list(settings.OPTION_NAMES.items()) == [
        ("chunk_size", "chunk_size"), ("chunk_overlap", "chunk_overlap"), ("page_chunk_limit", "page_chunk_limit"),
        ("loader", "pdf_loader"), ("chunk_headers", "chunk_headers"), ("chunk_context", "chunk_context"),
        ("embedding_model", "embedding_model"), ("embedding_backend", "embedding_backend"),
        ("bm25_stemmer", "bm25_stemmer")]
    assert [f.name for f in settings.index_setting_fields()][:4] == ["pdf_loader", "chunk_size", "page_chunk_limit",
                                                                     "chunk_overlap"]


def test_every_index_setting_has_a_flag_in_both_command_lines_and_a_constant_in_local_rag():
    for parser in (add_pdfs.build_parser(), eval_retrieval.build_parser()):
        dests = {action.dest for action in parser._actions}
        assert set(settings.OPTION_NAMES) <= dests
    for field in dataclasses.fields(IndexSettings) + dataclasses.fields(RetrievalSettings):
        assert hasattr(local_rag, field.metadata["constant"]), field.name


def test_options_round_trip_and_over():
    chosen = IndexSettings.from_options({"loader": "pypdf", "chunk_size": 800, "mode": "dense", "quiet": True})
    assert chosen == IndexSettings(pdf_loader="pypdf", chunk_size=800)  # other keys are not index settings
    assert chosen.chosen() == {"chunk_size": 800, "pdf_loader": "pypdf"}  # field order, None left out
    assert chosen.as_options() == {"chunk_size": 800, "loader": "pypdf"}  # axis order, option names
    base = IndexSettings(chunk_size=2000, chunk_overlap=200, pdf_loader="pypdfium2")
    assert chosen.over(base) == IndexSettings(chunk_size=800, chunk_overlap=200, pdf_loader="pypdf")


def test_defaults_come_from_the_constants_read_now(monkeypatch):
    monkeypatch.setattr(local_rag, "CHUNK_SIZE", 123)
    monkeypatch.setattr(local_rag, "FUSION", "convex")
    assert IndexSettings.from_constants(vars(local_rag)).chunk_size == 123
    assert RetrievalSettings.from_constants(vars(local_rag)).fusion == "convex"


def test_a_profile_splits_into_index_and_retrieval_settings():
    index, retrieval = settings.profile_settings(local_rag.PROFILES["long-pdf"])
    assert index == IndexSettings(chunk_size="page")
    assert retrieval == RetrievalSettings(retrieval_mode="hybrid", fusion="convex", dense_weight=0.8,
                                          document_prior=0.8)
    with pytest.raises(RAGError, match=r"unknown setting 'chunk_sise' in a profile \(PROFILES in local_rag.py\)"):
        settings.profile_settings({"chunk_sise": 800})


def test_a_profile_fills_only_what_the_command_line_left_out():
    """One way for both command lines: by option name, a given flag or a swept axis wins over the preset."""
    preset = {"chunk_size": "page", "pdf_loader": "pypdf", "retrieval_mode": "hybrid", "dense_weight": 0.8}
    given = {"dense_weight": 0.5}
    assert settings.profile_filling(preset, given.get) == {"chunk_size": "page", "loader": "pypdf", "mode": "hybrid"}
    assert settings.profile_filling(preset, given.get, skip={"mode", "loader"}) == {"chunk_size": "page"}
    assert [settings.option_name(n) for n in ("retrieval_mode", "pdf_loader", "fusion")] == ["mode", "loader", "fusion"]


@pytest.mark.parametrize("change, message", [
    ({"retrieval_mode": "semantic"}, "unknown retrieval mode 'semantic'; use one of dense, bm25, hybrid, union"),
    ({"rank_by": "file"}, "unknown ranking unit 'file'; use one of page, chunk"),
    ({"dense_weight": 1.5}, "the dense weight of convex fusion must be a number from 0 to 1, got 1.5"),
    ({"ivf_probes": -1}, "ivf_probes must be a whole number of at least 0, got -1"),
    ({"ivf_probes": True}, "ivf_probes must be a whole number of at least 0, got True"),
])
def test_retrieval_settings_check_names_the_value_and_what_is_valid(change, message):
    values = dataclasses.replace(RetrievalSettings.from_constants(vars(local_rag)), **change)
    with pytest.raises(RAGError) as error:
        values.check()
    assert str(error.value) == message


def test_local_rag_takes_values_or_the_older_keywords_alike(tmp_path, monkeypatch):
    by_values = local_rag.LocalRAG(tmp_path / "a", reranker_model=None, quiet=True,
                                   index=IndexSettings(chunk_size=300, chunk_overlap=30),
                                   retrieval=RetrievalSettings(retrieval_mode="dense", fusion="convex"))
    by_keywords = local_rag.LocalRAG(tmp_path / "a", retrieval_mode="dense", reranker_model=None, quiet=True,
                                     chunk_size=300, chunk_overlap=30, fusion="convex")
    for rag in (by_values, by_keywords):
        assert (rag.settings["chunk_size"], rag.settings["chunk_overlap"]) == (300, 30)
        assert (rag.retrieval_mode, rag.fusion, rag.rrf_k) == ("dense", "convex", local_rag.RRF_K)
    # A keyword wins over the value; a constant changed before constructing is the default.
    monkeypatch.setattr(local_rag, "CHUNK_OVERLAP", 10)
    monkeypatch.setattr(local_rag, "RANK_BY", "chunk")
    rag = local_rag.LocalRAG(tmp_path / "b", reranker_model=None, quiet=True, chunk_size=100,
                             index=IndexSettings(chunk_size=300))
    assert (rag.settings["chunk_size"], rag.settings["chunk_overlap"], rag.rank_by) == (100, 10, "chunk")


def test_the_package_face_needs_no_root_script(tmp_path):
    """localrag.retrieval.rag.LocalRAG reads its defaults from whatever settings block it is given."""
    from localrag.retrieval.rag import LocalRAG

    class Block:
        pass

    block = Block()
    for name, value in vars(local_rag).items():
        if name.isupper() or name in ("load_embeddings_for", "load_reranker_for", "expected_export",
                                      "iter_extracted", "file_sha256", "progress_bars_off"):
            setattr(block, name, value)
    block.RETRIEVAL_K = 7
    block.CHUNK_SIZE = 640
    rag = LocalRAG(tmp_path / "c", reranker_model=None, face=block)
    assert (rag.k(None), rag.settings["chunk_size"]) == (7, 640)
