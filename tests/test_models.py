"""Which models load, from where, and when anything is downloaded (localrag/models/loading.py, LocalRAG's reranker).

Nothing is downloaded unless the caller allows it (--allow-downloads, LocalRAG(allow_downloads=True),
ALLOW_DOWNLOADS), and nothing asks huggingface.co whether it could be: a model that is not on this machine (a
folder, a pip package, the local Hugging Face cache) is an error naming it when the user named it, and for the
shipped default reranker "off" with its reason. Each test has a Hugging Face cache of its own (`hf_cache`); a
model "present" is a tiny cross-encoder copied into it in the layout a download leaves.
"""
from __future__ import annotations

import socket

import pytest
from conftest import put_in_hf_cache

import add_pdfs
import local_rag
from local_rag import LocalRAG, RAGError
from localrag.models import loading

DEFAULT = "cross-encoder/ms-marco-MiniLM-L-6-v2"
NOT_DOWNLOADED = ("Reranker 'nobody/reranker' is not downloaded: there is no such folder and it is not in the local "
                  "Hugging Face cache. Download it once with --allow-downloads (in Python LocalRAG(..., "
                  "allow_downloads=True), or ALLOW_DOWNLOADS in local_rag.py), or give a local model folder")
OFF_REASON = (f"{DEFAULT} is not downloaded: not in the local Hugging Face cache; --allow-downloads fetches it "
              f"once")


@pytest.fixture
def no_socket(monkeypatch) -> list:
    """Fail the test at any attempt to open a network connection; HF_HUB_OFFLINE lifted, so that only our own
    rule (no download unless allowed) keeps the code from the network."""
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    tried = []

    def refuse(address, *args, **kwargs):
        tried.append(address)
        raise AssertionError(f"a connection to {address!r} was opened")

    monkeypatch.setattr(socket, "create_connection", refuse)
    return tried


class Factory:
    """A model loader that records how it was called and returns what it was asked for."""

    def __init__(self, fail_cached: bool = False):
        self.calls: list[tuple[str, bool]] = []
        self.fail_cached = fail_cached

    def __call__(self, name: str, local_files_only: bool = False):
        self.calls.append((name, local_files_only))
        if local_files_only and self.fail_cached:
            raise OSError("model.safetensors is missing")
        return f"model {name}"


def load(factory: Factory, name: str, allow: bool) -> object:
    return loading._load_hf_model(factory, name, "Reranker", allow, 0.5)


# ----------------------------------------------------------------------------- the loader's rule


def test_a_model_that_is_not_here_is_an_error_without_any_connection(hf_cache, no_socket):
    factory = Factory()
    with pytest.raises(RAGError) as raised:
        load(factory, "nobody/reranker", allow=False)
    assert str(raised.value) == NOT_DOWNLOADED
    assert raised.value.reason == "is not downloaded: not in the local Hugging Face cache; --allow-downloads " \
                                  "fetches it once"
    assert factory.calls == [] and no_socket == []  # not looked for online, not even the loader asked


def test_a_folder_and_the_hf_cache_load_without_a_connection(hf_cache, tmp_path, no_socket):
    folder = tmp_path / "my-reranker"
    folder.mkdir()
    (folder / "config.json").write_text("{}", encoding="utf-8")
    factory = Factory()
    assert load(factory, str(folder), allow=False) == f"model {folder}"
    assert not loading.in_hf_cache(DEFAULT)
    put_in_hf_cache(hf_cache, DEFAULT, folder)
    assert loading.in_hf_cache(DEFAULT)  # known by the layout, without the loader (torch)
    assert load(factory, DEFAULT, allow=False) == f"model {DEFAULT}"
    assert factory.calls == [(str(folder), False), (DEFAULT, True)] and no_socket == []


def test_a_cached_model_that_does_not_load_is_an_error_that_says_how_to_repair(hf_cache, tmp_path, no_socket):
    (tmp_path / "partial").mkdir()
    (tmp_path / "partial" / "config.json").write_text("{}", encoding="utf-8")
    put_in_hf_cache(hf_cache, DEFAULT, tmp_path / "partial")
    with pytest.raises(RAGError) as raised:
        load(Factory(fail_cached=True), DEFAULT, allow=False)
    assert str(raised.value) == (
        f"Reranker '{DEFAULT}' could not be loaded from the local Hugging Face cache (OSError: model.safetensors is "
        f"missing); download it again with --allow-downloads (in Python LocalRAG(..., allow_downloads=True), or "
        f"ALLOW_DOWNLOADS in local_rag.py), or give a local model folder")
    assert raised.value.reason == ("could not be loaded from the local Hugging Face cache (OSError); "
                                   "--allow-downloads fetches it again")
    assert no_socket == []


def test_downloads_allowed_still_never_download_under_hf_hub_offline(hf_cache, monkeypatch, no_socket):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    factory = Factory()
    with pytest.raises(RAGError) as raised:
        load(factory, "nobody/reranker", allow=True)
    assert str(raised.value) == (
        "Reranker 'nobody/reranker' is not in the local Hugging Face cache, and HF_HUB_OFFLINE is set, which forbids "
        "downloading it although downloads are allowed; unset HF_HUB_OFFLINE to download it once, or give a local "
        "model folder")
    assert factory.calls == [] and no_socket == []


def test_downloads_allowed_ask_the_hub_then_download(hf_cache, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    reached = []

    def unreachable(address, timeout=None):
        reached.append(address)
        raise OSError("Network is unreachable")

    monkeypatch.setattr(socket, "create_connection", unreachable)
    factory = Factory()
    with pytest.raises(RAGError) as raised:
        load(factory, "nobody/reranker", allow=True)
    assert str(raised.value) == (
        "Reranker 'nobody/reranker' is not in the local Hugging Face cache, and huggingface.co did not answer within "
        "0.5 s, so it cannot be downloaded now; connect to the internet and run again, or give a local model folder")
    assert reached == [("huggingface.co", 443)] and factory.calls == []

    class Connection:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(socket, "create_connection", lambda address, timeout=None: Connection())
    assert load(factory, "nobody/reranker", allow=True) == "model nobody/reranker"
    assert factory.calls == [("nobody/reranker", False)]  # the download


# ----------------------------------------------------------------------------- LocalRAG's reranker


def test_the_default_reranker_not_downloaded_is_off_for_a_stated_reason(tiny_index, hf_cache, no_socket):
    rag = LocalRAG(tiny_index[1], quiet=True)
    assert (rag.reranker, rag.reranker_model, rag.reranker_asked) == (None, None, DEFAULT)
    assert rag.reranker_off_reason == OFF_REASON
    assert no_socket == []  # the old code asked huggingface.co here (and downloaded the model when it answered)


def test_the_default_reranker_in_the_hf_cache_is_on(tiny_index, hf_cache, tiny_cross_encoder, no_socket):
    put_in_hf_cache(hf_cache, DEFAULT, tiny_cross_encoder)
    rag = LocalRAG(tiny_index[1], quiet=True)
    assert rag.reranker is not None and (rag.reranker_model, rag.reranker_off_reason) == (DEFAULT, None)
    assert len(rag.retrieve("What is vega?", k=3)) == 3 and rag.stats["rerank_pairs"] > 0
    assert no_socket == []


def test_a_reranker_the_user_named_must_be_here(tiny_index, hf_cache, monkeypatch, no_socket):
    with pytest.raises(RAGError) as raised:  # an argument: at once
        LocalRAG(tiny_index[1], reranker_model="nobody/reranker", quiet=True)
    assert str(raised.value) == NOT_DOWNLOADED
    # RERANKER_MODEL edited away from the shipped default: named too (an error at its first use, not "off").
    monkeypatch.setattr(local_rag, "RERANKER_MODEL", "nobody/reranker")
    rag = LocalRAG(tiny_index[1], quiet=True)
    with pytest.raises(RAGError) as raised:
        rag.retrieve("What is vega?")
    assert str(raised.value) == NOT_DOWNLOADED
    # The shipped default named as an argument is named as well.
    with pytest.raises(RAGError, match=r"^Reranker 'cross-encoder/ms-marco-MiniLM-L-6-v2' is not downloaded: "):
        LocalRAG(tiny_index[1], reranker_model=DEFAULT, quiet=True)
    assert no_socket == []


def test_allowed_downloads_make_an_absent_default_reranker_an_error(tiny_index, hf_cache, monkeypatch):
    """Asked to download, the run does not quietly measure without the reranker when the download cannot happen."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(local_rag, "ALLOW_DOWNLOADS", True)  # the setting, read when LocalRAG is made
    rag = LocalRAG(tiny_index[1], quiet=True)
    assert rag.allow_downloads is True
    with pytest.raises(RAGError, match=r"^Reranker 'cross-encoder/ms-marco-MiniLM-L-6-v2' is not in the local "
                                       r"Hugging Face cache, and HF_HUB_OFFLINE is set, which forbids "):
        rag.retrieve("What is vega?")
    assert LocalRAG(tiny_index[1], quiet=True, allow_downloads=False).reranker_off_reason == OFF_REASON


def test_the_shipped_reranker_is_the_setting():
    assert local_rag.RERANKER_MODEL == local_rag.SHIPPED_RERANKER == DEFAULT
    assert local_rag.ALLOW_DOWNLOADS is False


# ----------------------------------------------------------------------------- the embedding model


def test_add_pdfs_with_an_embedding_model_that_is_not_here_exits_2(tiny_docs, tmp_path, hf_cache, capsys, no_socket):
    code = add_pdfs.main([str(tiny_docs), "--index", str(tmp_path / "index"), "--embedding-model", "nobody/embedder",
                          "--quiet"])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err == ("error: Embedding model 'nobody/embedder' is not downloaded: there is no such folder and it is not "
                   "in the local Hugging Face cache. Download it once with --allow-downloads (in Python LocalRAG(..., "
                   "allow_downloads=True), or ALLOW_DOWNLOADS in local_rag.py), or give a local model folder\n")
    assert no_socket == []


# ----------------------------------------------------------------------------- the command lines


def test_eval_with_a_named_reranker_that_is_not_here_exits_2(tiny_index, tmp_path, hf_cache, capsys, no_socket):
    import eval_retrieval

    docs, index = tiny_index
    (tmp_path / "gold.csv").write_text("question,expected_source,expected_page\nWhat is vega?,options.pdf,1\n",
                                       encoding="utf-8")
    argv = ["--goldset", str(tmp_path / "gold.csv"), "--docs", str(docs), "--index", str(index), "--report",
            str(tmp_path / "r.txt"), "--quiet"]
    assert eval_retrieval.main([*argv, "--rerank-model", "nobody/reranker"]) == 2
    assert capsys.readouterr() == ("", f"error: {NOT_DOWNLOADED}\n")
    # --allow-downloads reaches the loader: asked to download, under HF_HUB_OFFLINE it cannot (the default reranker
    # then is no quiet "off" either).
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        assert eval_retrieval.main([*argv, "--allow-downloads"]) == 2
    assert capsys.readouterr().err == (
        f"error: Reranker '{DEFAULT}' is not in the local Hugging Face cache, and HF_HUB_OFFLINE is set, which forbids "
        f"downloading it although downloads are allowed; unset HF_HUB_OFFLINE to download it once, or give a local "
        f"model folder\n")
    assert not (tmp_path / "r.txt").exists() and no_socket == []


def test_add_pdfs_passes_allow_downloads_to_the_loader(tiny_docs, tmp_path, hf_cache, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code = add_pdfs.main([str(tiny_docs), "--index", str(tmp_path / "index"), "--embedding-model", "nobody/embedder",
                          "--allow-downloads", "--quiet"])
    assert code == 2
    assert capsys.readouterr().err == (
        "error: Embedding model 'nobody/embedder' is not in the local Hugging Face cache, and HF_HUB_OFFLINE is set, "
        "which forbids downloading it although downloads are allowed; unset HF_HUB_OFFLINE to download it once, or "
        "give a local model folder\n")
