"""An index's embedding model (`IndexModel`): loaded at the first text to embed, and described (name, prefixes,
export) without loading it while it is not loaded, so opening an index, a no-op sync and a cached evaluation need no
model."""
from __future__ import annotations

from typing import Any, Callable

from localrag.models import backends as embedding_backends
from localrag.models import loading


class IndexModel:
    """The model `name` on `backend`: `load(name, backend)` loads it at the first use of `embeddings`;
    `expected_export(name, backend)` is the export that loading would run."""

    def __init__(self, name: str, backend: str, load: Callable[[str, str], Any],
                 expected_export: Callable[[str, str], str | None]):
        self.name, self.backend = name, backend
        self._load, self._expected_export = load, expected_export
        self._embeddings = None

    @property
    def embeddings(self):
        """The model (LangChain Embeddings), loaded at the first access."""
        if self._embeddings is None:
            self._embeddings = self._load(self.name, self.backend)
        return self._embeddings

    @embeddings.setter
    def embeddings(self, value) -> None:
        self._embeddings = value

    @property
    def loaded(self) -> bool:
        """Whether the model has been loaded (or set)."""
        return self._embeddings is not None

    @property
    def export(self) -> str | None:
        """The export the model runs ("torch", "onnx-int8-avx2", ...): the loaded model's, else the one loading it
        would give."""
        if self._embeddings is not None:
            return embedding_backends.export_name(self._embeddings)
        return self._expected_export(self.name, self.backend)

    @property
    def prefixes(self) -> dict[str, str]:
        """The prefixes the model applies (recorded in the manifest): the loaded model's, else by its name."""
        if self._embeddings is not None:
            return loading.embedding_prefixes(self._embeddings)
        return loading.model_prefixes(self.name)

    @property
    def display_name(self) -> str:
        """The model's name as reports show it (never a local path): the loaded model's, else by its name."""
        if self._embeddings is not None:
            return self._embeddings.model_name
        return loading.display_name(self.name)
