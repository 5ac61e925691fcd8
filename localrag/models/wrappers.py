"""The LangChain `Embeddings` wrappers of localRAG's models: the model's prefixes put before each text
(`PrefixedEmbeddings`), and a Chroma store's embedding function that loads an index's model when LangChain first
embeds a text (`LazyEmbeddings`). A module of their own so that importing langchain_core's Embeddings (about 0.3 s)
waits until a model is loaded or LangChain's store is built: a cached evaluation does neither.
"""
from __future__ import annotations

import weakref
from typing import Sequence

from langchain_core.embeddings import Embeddings

from localrag.errors import RAGError


class PrefixedEmbeddings(Embeddings):
    """Any LangChain Embeddings with the model's prefixes put before each text: the query prefix in `embed_query`
    and `embed_queries`, the passage prefix in `embed_documents`. Other attributes (model_name, _client) are the
    wrapped model's."""

    def __init__(self, inner, prefixes: dict[str, str]):
        self.inner = inner
        self.prefixes = dict(prefixes)

    def __getattr__(self, name: str):
        if name == "inner":  # not set yet (copy, pickle): no recursion
            raise AttributeError(name)
        return getattr(self.inner, name)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.inner.embed_documents([self.prefixes["passage"] + t for t in texts])

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(self.prefixes["query"] + text)

    def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        # embed_documents of the wrapped model: it adds nothing, the query prefix is ours.
        return self.inner.embed_documents([self.prefixes["query"] + t for t in texts])

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.embed_documents(texts)

    async def aembed_query(self, text: str) -> list[float]:
        return self.embed_query(text)


class LazyEmbeddings(Embeddings):
    """The Chroma store's embedding function: an index's model, loaded only when LangChain embeds a text.

    Holds the index weakly, so the store it belongs to does not keep the index alive."""

    def __init__(self, index):
        """`index`: the Index, or a weak reference to it."""
        self._index = index if isinstance(index, weakref.ref) else weakref.ref(index)

    def _model(self):
        index = self._index()
        if index is None:
            raise RAGError("the index of this store has been closed; open it again with LocalRAG")
        return index.embeddings

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._model().embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self._model().embed_query(text)
