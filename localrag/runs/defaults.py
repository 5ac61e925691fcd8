"""The values an evaluation runs on: the root scripts' defaults, its flags as parsed, and its options checked.

eval_retrieval.py owns the paths under eval/ and local_rag.py the retriever's defaults; the package may import
neither (tests/test_layout.py), so `eval_retrieval.eval_defaults()` reads both into one `EvalDefaults`, the
opener of an index (LocalRAG) included. The script turns its parsed flags into a `CommandLine` at once;
options.resolve checks it against the defaults and returns the `EvalOptions` every later step reads.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, AbstractSet, Callable, ContextManager, Mapping, Protocol, Sequence, TypeVar

from localrag import files
from localrag.evaluation.judge import Judging
from localrag.settings import OPTION_NAMES, IndexSettings
from localrag.text.pages import PAGE_OFFSET

C = TypeVar("C", bound="CommandLine")


class LocalRAGLike(Protocol):
    """What the evaluation uses of an opened index: local_rag.LocalRAG, the chat's retriever over one index folder
    (the package may not import the root script, so it is handed in as `EvalDefaults.open_retriever`)."""

    @property
    def path(self) -> Path: ...
    @property
    def location(self) -> str: ...
    @property
    def chroma_url(self) -> str | None: ...
    @property
    def read_only(self) -> bool: ...
    @property
    def info(self) -> dict[str, Any]: ...
    @property
    def info_problem(self) -> str | None: ...
    @property
    def settings(self) -> dict[str, Any]: ...
    @property
    def display_settings(self) -> dict[str, Any]: ...
    @property
    def followed_paths(self) -> list[str]: ...
    @property
    def embedding_export(self) -> str | None: ...
    @property
    def index(self) -> Any: ...  # localrag.index.index.Index
    @property
    def retriever(self) -> Any: ...  # localrag.retrieval.retriever.Retriever
    @property
    def candidate_k(self) -> int: ...
    @property
    def rrf_k(self) -> int: ...
    @property
    def fusion(self) -> str: ...
    @property
    def dense_weight(self) -> float: ...
    @property
    def document_prior(self) -> float: ...
    @property
    def rank_by(self) -> str: ...
    @property
    def query_instructions(self) -> str: ...
    @property
    def reranker(self) -> Any: ...  # the loaded reranker, or None when reranking is off
    @property
    def reranker_model(self) -> str | None: ...
    @property
    def reranker_asked(self) -> Any: ...  # the reranker the settings ask for (a name), or None
    @property
    def reranker_off_reason(self) -> str | None: ...

    def writing(self, wait: bool = ...) -> ContextManager[Any]: ...
    def reading(self, wait: bool = ...) -> ContextManager[Any]: ...
    def sync(self, paths: Sequence[str | Path], rebuild: bool = ..., docs_root: str | Path | None = ...,
             progress: bool = ..., *, wait: bool = ..., switch_folder: bool = ..., allow_empty: bool = ...) -> Any: ...
    def sync_records(self, records: Any, rebuild: bool = ..., progress: bool = ..., *, wait: bool = ...) -> Any: ...
    def pdf_changes(self, docs_path: str | Path) -> dict[str, list[str]]: ...
    def stale_reasons(self) -> list[str]: ...
    def require_consistent(self) -> Any: ...
    def list_documents(self) -> list[dict]: ...
    def indexed_chunks(self) -> list[tuple[str, str, dict]]: ...
    def prepare_query(self, query: str, instructions: bool = ...) -> str: ...
    def candidate_depth(self, k: int) -> int: ...
    def describe_order(self, mode: str | None = ..., rerank: bool | None = ...) -> str: ...


# Opens an index folder as the chat's retriever: LocalRAG(path, keyword arguments of its settings).
OpenRetriever = Callable[..., LocalRAGLike]


@dataclass(frozen=True)
class EvalDefaults:
    """Where an evaluation reads and writes when no flag says otherwise, and the retriever's defaults."""

    goldset: str  # the goldset evaluated by default
    goldset_template: tuple[Path, ...]  # copied to start a goldset (English headers, German headers)
    report: str  # the committed plain-text report
    ablation_report: str  # the --ablation table
    sweep_report: str  # the --sweep table
    runs_dir: str  # reports of the default goldset under other settings
    label_sample: str  # where --label-sample writes its answers to label without --out
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
    embedding_batch_size: int  # texts per embedding call
    open_retriever: OpenRetriever  # LocalRAG: opens an index as the chat's retriever
    profiles: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # --profile's presets


@dataclass(frozen=True)
class CommandLine:
    """eval_retrieval.py's flags as parsed, unchecked: one field per flag, named by its dest (--no-rerank:
    no_rerank); None where a flag was left out and its default comes later (the profile, the index, ...)."""

    # goldset and report
    goldset: str
    k: str | None
    page_tolerance: int
    report: str | None
    json: str | None
    replace_baseline: bool
    markdown: str | None
    output_dir: str | None  # where the reports written by default go instead of their default folders
    csv: str | None
    html: str | None  # --html: the HTML page of the run
    explain: str | None
    diagnostic_depth: int
    quiet: bool
    # index
    index: str | None
    docs: str | None
    chroma_url: str | None
    rebuild: bool
    no_sync: bool
    # the index settings' flags (--loader, --chunk-size, ...; settings.IndexSettings), as given: chunk size as text
    # ("800", "page"); EvalOptions: parsed (800, "page"). Read by option name as well: `command.chunk_size`.
    index_settings: IndexSettings
    index_cache: str
    no_wait: bool
    check_store: bool  # read the store whole to check it, not the vector file's record of the last such read
    switch_folder: bool
    allow_empty: bool
    # retrieval
    mode: str | None  # EvalOptions: the profile's, else the default mode
    profile: str | None
    no_rerank: bool
    rerank_model: str | None
    allow_downloads: bool | None
    rank_by: str
    rrf_k: int | None
    fusion: str | None
    dense_weight: float | None
    document_prior: float | None
    ivf_min_chunks: int | None
    ivf_lists: int | None
    ivf_probes: int | None
    query_instructions: bool
    query_cache: str
    query_cache_entries: int
    no_query_cache: bool
    # datasets
    dataset: str | None  # EvalOptions: the BEIR folder (a named benchmark downloaded)
    data_dir: str
    level: str | None
    split: str
    max_queries: int | None
    max_corpus_docs: int | None
    seed: int
    run_file: str | None
    qrels_file: str | None
    # judge
    judge: str | None
    judge_k: int | None
    judge_max_calls: int | None
    judge_cache: str | None
    judge_domain: str | None
    # answers
    answers: str | None
    answer_model: str | None
    answer_k: int | None
    answer_judge: str | None
    label_sample: int | None
    answer_labels: str | None
    # goldset tools
    lint: bool
    generate: int | None
    out: str | None  # --generate's or --label-sample's file; None: each one's default
    force: bool
    llm: str | None
    # comparisons
    ablation: bool
    sweep: tuple[str, ...] | None
    compare: tuple[str, ...] | None
    compare_to: str | None
    no_compare: bool
    intersect: bool
    resamples: int
    suite: str | None
    output_name: str | None
    # gates
    fail_under: tuple[str, ...] | None
    fail_on_regression: bool

    @classmethod
    def from_flags(cls, flags: Mapping[str, Any]) -> CommandLine:
        """The command line of argparse's values by dest (`vars(namespace)`); lists (repeated flags) as tuples, the
        index settings' flags as one IndexSettings."""
        return cls(**{name: tuple(value) if isinstance(value, list) else value for name, value in flags.items()
                      if name not in OPTION_NAMES}, index_settings=IndexSettings.from_options(flags))

    def __getattr__(self, name: str) -> Any:
        """An index setting by its option name (`chunk_size`, `loader`, ...): the flag's value, None when not given."""
        chosen = self.__dict__.get("index_settings")
        if chosen is None or name not in OPTION_NAMES:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return getattr(chosen, OPTION_NAMES[name])

    def with_options(self: C, **options: Any) -> C:
        """A copy with these options (flag names; an index setting's option name sets it in `index_settings`)."""
        chosen = {key: value for key, value in options.items() if key in OPTION_NAMES}
        others = {key: value for key, value in options.items() if key not in OPTION_NAMES}
        if chosen:
            others["index_settings"] = dataclasses.replace(
                self.index_settings, **{OPTION_NAMES[key]: value for key, value in chosen.items()})
        return dataclasses.replace(self, **others)

    def flags(self) -> dict[str, Any]:
        """Every flag's value by dest: the fields of CommandLine (an EvalOptions' own fields left out)."""
        return {f.name: getattr(self, f.name) for f in fields(CommandLine)}


@dataclass(frozen=True)
class Gates:
    """The CI gates of one evaluation: --fail-under as (metric key, threshold) pairs, --fail-on-regression."""

    fail_under: tuple[tuple[str, float], ...] = ()
    fail_on_regression: bool = False


@dataclass(frozen=True)
class EvalOptions(CommandLine):
    """An evaluation's options, checked and completed once (eval_options.resolve) before any index is opened: the
    flags (the profile's preset filled in, the mode set, the chunk size parsed, a named dataset downloaded, the
    report paths filled in) and what was derived from them."""

    # Filled in by resolve: never None here (the fields keep CommandLine's order).
    report: str
    json: str
    mode: str

    defaults: EvalDefaults
    k_values: tuple[int, ...] = ()  # the cutoffs, sorted; the deepest is the retrieval depth
    sweep_axes: tuple[tuple[str, tuple[Any, ...]], ...] = ()  # --sweep's axes and their parsed values, in order
    profile_keys: AbstractSet[str] = frozenset()  # the options --profile filled (report names say the profile)
    page_offset: int = PAGE_OFFSET  # a 0-based stored page + page_offset = the page a goldset names
    gates: Gates = Gates()  # --fail-under parsed, --fail-on-regression
    compare_file: str | None = None  # where the committed baseline's comparison goes instead of into the baseline
    settings_base_json: str | None = None  # the JSON report a run of other settings is compared with

    @property
    def judging(self) -> Judging | None:
        """The LLM judge of this run, or None without --judge."""
        if not self.judge:
            return None
        return Judging(self.judge, self.judge_cache or self.defaults.judge_cache, k=self.judge_k,
                       max_calls=self.judge_max_calls, domain=self.judge_domain)


def log(message: str, quiet: bool) -> None:
    """Progress and notes on stderr (files.log), hidden by `quiet` (--quiet); warnings ("warning: ...") are always
    shown."""
    files.log(message, quiet=quiet and not message.startswith("warning: "))
