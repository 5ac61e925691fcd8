"""The evaluation's defaults, handed down whole from the root scripts' settings blocks.

eval_retrieval.py owns the paths under eval/ and local_rag.py the retriever's defaults; the package may import
neither (tests/test_layout.py), so `eval_retrieval.eval_defaults()` reads both when the parser is built into one
`EvalDefaults`, which travels on the parsed options as `args.defaults`.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from localrag import files

# The type of an opened index: local_rag.LocalRAG, which the package may not import (it is a root script).
LocalRAG = Any


@dataclass(frozen=True)
class EvalDefaults:
    """Where an evaluation reads and writes when no flag says otherwise, and the retriever's defaults."""

    goldset: str  # the goldset evaluated by default
    goldset_template: Path  # copied to start a goldset
    report: str  # the committed plain-text report
    ablation_report: str  # the --ablation table
    sweep_report: str  # the --sweep table
    runs_dir: str  # reports of the default goldset under other settings
    compare_path: str  # the committed baseline's comparison with the report it replaced
    dataset_report_dir: str  # default reports of --dataset runs
    goldset_report_suffix: str  # another goldset's default report: <goldset name><suffix>.txt beside it
    index: str  # the index the retriever uses
    docs: str  # the folder that index follows by default
    chroma_url: str | None  # a shared Chroma server instead of index folders
    judge_cache: str  # the LLM judge's (and --llm's) cache of replies
    dataset_cache: str  # where dataset indexes are kept between runs
    k_values: Sequence[int]  # cutoffs for goldsets
    dataset_k_values: Sequence[int]  # cutoffs for BEIR datasets
    page_tolerance: int  # pages a hit may lie away from the expected one
    use_query_instructions: bool  # whether questions get the query instructions by default
    query_instructions: str  # the text appended with --query-instructions
    # LocalRAG's retrieval defaults by argument name: retrieval_mode, rrf_k, fusion, dense_weight, document_prior,
    # rank_by, ivf_probes
    retriever: Mapping[str, Any]
    index_settings: Mapping[str, Any]  # the settings a new index gets (index names: embedding_model, ...)
    page_chunk_limit: int  # with whole-page chunks: the characters above which a page is split
    retrieval_k: int  # passages the chat gets
    long_pdf_pages: int  # average pages above which the long-pdf profile is suggested
    embedding_batch_size: int  # texts per embedding call
    profiles: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # --profile's presets
    open_retriever: Callable[..., Any] | None = None  # LocalRAG: opens an index as the chat's retriever


def log(args: argparse.Namespace, message: str) -> None:
    """Progress and notes on stderr (files.log), hidden by --quiet; warnings ("warning: ...") are always shown."""
    files.log(message, quiet=args.quiet and not message.startswith("warning: "))
