"""The settings of an index and of a retrieval, as values: the one list of their names, what each means, how
a flag's text is parsed and checked, the profiles, and how the index settings meet the manifest's and the defaults
(`resolve_settings`) and cut a page (`text_splitter`).

An index setting is one field of `IndexSettings` (its flag, the constant of local_rag.py that holds its default,
what its change rebuilds, its help); a retrieval setting one field of `RetrievalSettings`. The command lines'
flags, the sweep's axes, the index's checks and the report names are derived from these lists.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import shlex
from dataclasses import dataclass, field
from typing import AbstractSet, Any, Callable, Mapping

from localrag.errors import RAGError

PAGE_CHUNKS = "page"  # the chunk size that keeps each page whole (one chunk per page, no overlap)
PDF_LOADERS = ("pypdf", "pypdfium2")  # the PDF text extractors
EMBEDDING_BACKENDS = ("torch", "onnx", "onnx-int8", "openvino-int8")  # how an embedding model runs
# Stemmer names besides PyStemmer's Snowball algorithms: "none" keeps the casefolded tokens as they are.
NO_STEMMER = "none"
# Stemmer settings that first split compounds at joints found in the corpus: name -> (Snowball language, linking
# elements a part may end with before the next one; German: Fugen-s, -es, -n, -en, -e). GermanQuAD dev, hybrid with
# multilingual-e5-small: MRR@10 0.9475 -> 0.9516 (bench/fusion_cv.py, docs/german.md).
DECOMPOUND_STEMMERS = {"german+decompound": ("german", ("", "s", "es", "n", "en", "e"))}
FUSIONS = ("rrf", "convex")  # how hybrid mode joins the dense and BM25 lists (the name of its stage)
RANK_UNITS = ("page", "chunk")  # what a retrieved list holds once each: a page (by its best chunk) or every chunk

# What a change of an index setting costs: every stored chunk, only the BM25 arrays, or (with whole-page chunks
# only) the pages' split.
REBUILD, BM25, PAGE = "rebuild", "bm25", "page"


def stemmer_names() -> tuple[str, ...]:
    """The accepted stemmer settings: "none", then every Snowball algorithm of the installed PyStemmer."""
    import Stemmer

    return (NO_STEMMER, *Stemmer.algorithms(), *DECOMPOUND_STEMMERS)


def check_stemmer(name: str) -> str:
    """`name` if it is a known stemmer setting, else a ValueError that lists the choices."""
    names = stemmer_names()
    if name not in names:
        raise ValueError(f"unknown BM25 stemmer {name!r}; use one of {', '.join(names)}")
    return name


def parse_chunk_size(text: str) -> int | str:
    """A --chunk-size value: a positive number of characters, or "page" (ValueError naming both otherwise)."""
    text = str(text).strip()
    if text == PAGE_CHUNKS:
        return PAGE_CHUNKS
    try:
        size = int(text)
    except ValueError:
        size = 0
    if size < 1:
        raise ValueError(f"must be a positive number of characters or {PAGE_CHUNKS!r} (one chunk per page), "
                         f"got {text!r}")
    return size


def setting(kind: str, constant: str, rank: int | tuple[int, int], help: str, *, option: str | None = None,
            choices: tuple[str, ...] | None = None, parse: Callable[[str], Any] | None = None,
            unrecorded: Any = None) -> Any:
    """A settings field (default None: not chosen). `kind`: what its change costs (REBUILD, BM25, PAGE, or "" for
    retrieval settings); `constant`: local_rag.py's constant with its default; `rank`: its place among the flags
    (and, where that differs, among the sweep axes: (flag's, axis's)); `help`: its flag's help, without the
    default; `option`: its flag's and sweep axis's name when that is not the field's; `parse`: how its flag's text
    is read (bool: an on/off flag); `unrecorded`: the value indexes built before the setting was recorded had."""
    flag_rank, axis_rank = rank if isinstance(rank, tuple) else (rank, rank)
    return field(default=None, metadata={"kind": kind, "constant": constant, "rank": flag_rank, "axis": axis_rank,
                                         "help": help,
                                         "option": option, "choices": choices, "parse": parse,
                                         "unrecorded": unrecorded})


@dataclass(frozen=True)
class IndexSettings:
    """How an index is built; None: not chosen (the index's value, else the default). Field order is the order
    an index records them in."""

    embedding_model: str | None = setting(
        REBUILD, "EMBEDDING_MODEL", 6, "embedding model name or folder")
    embedding_backend: str | None = setting(
        REBUILD, "EMBEDDING_BACKEND", 7, "how the embedding model runs", choices=EMBEDDING_BACKENDS)
    chunk_size: int | str | None = setting(
        REBUILD, "CHUNK_SIZE", (1, 0), "characters per chunk, or 'page' for one chunk per page without overlap",
        parse=parse_chunk_size)
    chunk_overlap: int | None = setting(REBUILD, "CHUNK_OVERLAP", (3, 1), "characters of overlap", parse=int)
    pdf_loader: str | None = setting(REBUILD, "PDF_LOADER", (0, 3), "PDF text extractor", option="loader",
                                     choices=PDF_LOADERS)
    chunk_headers: bool | None = setting(REBUILD, "CHUNK_HEADERS", 4, "prefix chunks with '[file, page N]'",
                                         parse=bool)
    chunk_context: bool | None = setting(
        REBUILD, "CHUNK_CONTEXT", 5, "with chunk headers: put each chunk's context line in its header: the file's "
        "title, form, period, registrant and the chunk's section", parse=bool, unrecorded=False)
    bm25_stemmer: str | None = setting(
        BM25, "BM25_STEMMER", 8, "Snowball stemmer of the BM25 side: none, german, english, ... any language of "
        "PyStemmer, or german+decompound, which also splits German compounds into words of the corpus")
    page_chunk_limit: int | None = setting(
        PAGE, "PAGE_CHUNK_LIMIT", 2, "with --chunk-size page: a page longer than this many characters is split",
        parse=int)

    def chosen(self) -> dict[str, Any]:
        """The settings given (not None), by field name."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if getattr(self, f.name) is not None}

    def as_options(self) -> dict[str, Any]:
        """The settings given, by option name (flag and sweep axis), in the sweep axes' order."""
        return {option: getattr(self, name) for option, name in OPTION_NAMES.items()
                if getattr(self, name) is not None}

    def over(self, defaults: IndexSettings) -> IndexSettings:
        """These settings, each one not given taken from `defaults`."""
        return dataclasses.replace(defaults, **self.chosen())

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> IndexSettings:
        """The settings named by option (`loader`, `chunk_size`, ...); other keys are ignored."""
        return cls(**{OPTION_NAMES[key]: value for key, value in options.items() if key in OPTION_NAMES})

    @classmethod
    def from_constants(cls, constants: Mapping[str, Any]) -> IndexSettings:
        """The defaults from a settings block such as local_rag.py's (its constants by name)."""
        return cls(**{f.name: constants[f.metadata["constant"]] for f in dataclasses.fields(cls)})


@dataclass(frozen=True)
class RetrievalSettings:
    """How a query is answered from an index; None: the default."""

    retrieval_mode: str | None = setting("", "RETRIEVAL_MODE", 0, "dense, bm25, hybrid or union", option="mode")
    candidate_k: int | None = setting("", "CANDIDATE_K", 1, "candidates each retriever contributes")
    rrf_k: int | None = setting("", "RRF_K", 2, "reciprocal rank fusion constant")
    fusion: str | None = setting("", "FUSION", 3, "how hybrid joins dense and BM25", choices=FUSIONS)
    dense_weight: float | None = setting("", "DENSE_WEIGHT", 4, "convex fusion's weight of the dense scores")
    document_prior: float | None = setting("", "DOCUMENT_PRIOR", 5, "weight of the document prior")
    rank_by: str | None = setting("", "RANK_BY", 6, "page or chunk", choices=RANK_UNITS)
    ivf_probes: int | None = setting("", "IVF_PROBES", 7, "IVF lists one dense search reads")
    query_instructions: str | None = setting("", "QUERY_ADDITIONAL_INSTRUCTIONS", 8, "text appended to queries")

    def chosen(self) -> dict[str, Any]:
        """The settings given (not None), by field name."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if getattr(self, f.name) is not None}

    def over(self, defaults: RetrievalSettings) -> RetrievalSettings:
        """These settings, each one not given taken from `defaults`."""
        return dataclasses.replace(defaults, **self.chosen())

    @classmethod
    def from_constants(cls, constants: Mapping[str, Any]) -> RetrievalSettings:
        """The defaults from a settings block such as local_rag.py's (its constants by name)."""
        return cls(**{f.name: constants[f.metadata["constant"]] for f in dataclasses.fields(cls)})

    def check(self) -> RetrievalSettings:
        """These settings (all given), or a RAGError naming the first invalid one and what is valid."""
        check_mode(self.retrieval_mode)
        check_rank_by(self.rank_by)
        check_fusion(self.fusion, self.dense_weight, self.document_prior)
        if isinstance(self.ivf_probes, bool) or not isinstance(self.ivf_probes, int) or self.ivf_probes < 0:
            raise RAGError(f"ivf_probes must be a whole number of at least 0, got {self.ivf_probes!r}")
        return self


@dataclass(frozen=True)
class IvfSettings:
    """The approximate dense search (IVF): shelves of `min_chunks` chunks or more get one with `lists` lists (None:
    as the index records, else the defaults), a search reads `probes` of them (0: an eighth)."""

    min_chunks: int | None
    lists: int | None
    probes: int
    default_min_chunks: int
    default_lists: int


def profile_settings(preset: Mapping[str, Any]) -> tuple[IndexSettings, RetrievalSettings]:
    """A profile (PROFILES in local_rag.py: LocalRAG's argument names) as the index and retrieval settings it
    sets; RAGError naming a name that is neither."""
    index = {f.name for f in dataclasses.fields(IndexSettings)}
    retrieval = {f.name for f in dataclasses.fields(RetrievalSettings)}
    if unknown := [key for key in preset if key not in index | retrieval]:
        raise RAGError(f"unknown setting {unknown[0]!r} in a profile (PROFILES in local_rag.py); use one of "
                       f"{', '.join(sorted(index | retrieval))}")
    return (IndexSettings(**{k: v for k, v in preset.items() if k in index}),
            RetrievalSettings(**{k: v for k, v in preset.items() if k in retrieval}))


def option_name(name: str) -> str:
    """A setting's option name (its flag and sweep axis) by its field name: retrieval_mode -> mode, pdf_loader ->
    loader, chunk_size -> chunk_size."""
    for field_ in (*dataclasses.fields(IndexSettings), *dataclasses.fields(RetrievalSettings)):
        if field_.name == name:
            return field_.metadata["option"] or name
    return name


def setting_flag(name: str, value: Any) -> str:
    """The command-line words that choose `value` for the index setting `name` (by field name): `--chunk-size
    page`, `--loader pypdf`, `--no-chunk-headers`."""
    flag = option_name(name).replace("_", "-")
    if isinstance(value, bool):
        return f"--{flag}" if value else f"--no-{flag}"
    return f"--{flag} {shlex.quote(str(value))}"


def profile_filling(preset: Mapping[str, Any], given: Callable[[str], Any],
                    skip: AbstractSet[str] = frozenset()) -> dict[str, Any]:
    """The one way a profile is applied: the options (by option name) its `preset` fills, each setting of it whose
    option the command line left out (`given(option)` is None) and that is not in `skip` (swept axes); RAGError for
    a name that is no setting."""
    profile_settings(preset)
    return {option_name(key): value for key, value in preset.items()
            if given(option_name(key)) is None and option_name(key) not in skip}


def _of_kind(kind: str) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(IndexSettings) if f.metadata["kind"] == kind)


# Settings whose change invalidates every stored chunk.
REBUILD_SETTINGS = _of_kind(REBUILD)
# Settings of the BM25 side only: recorded in the manifest, and a change rebuilds the BM25 arrays (seconds), never
# the embeddings.
BM25_SETTINGS = _of_kind(BM25)
# Settings that exist only with whole-page chunks: the characters above which a page is still split.
PAGE_SETTINGS = _of_kind(PAGE)
# What a manifest written before a setting existed was built with: indexes before context lines had none.
UNRECORDED_SETTINGS = {f.name: f.metadata["unrecorded"] for f in dataclasses.fields(IndexSettings)
                       if f.metadata["unrecorded"] is not None}
# Index settings by option name (flag and sweep axis), in the sweep axes' order, with the index's name for each.
OPTION_NAMES = {(f.metadata["option"] or f.name): f.name
                for f in sorted(dataclasses.fields(IndexSettings), key=lambda f: f.metadata["axis"])}


def index_setting_fields() -> list[dataclasses.Field]:
    """The fields of IndexSettings in the flags' order."""
    return sorted(dataclasses.fields(IndexSettings), key=lambda f: f.metadata["rank"])


@dataclass(frozen=True)
class Mode:
    """What a retrieval mode is (one entry of MODES); how its ordering stage is computed is retrieval code
    (localrag/retrieval/stages.py, STAGE_ORDERS, by stage name).

    `dense`, `bm25`: the searches it runs (a dense search needs query vectors, so the embedding model).
    `stage(settings)`: the stage whose list is the mode's order: a search's own name ("dense", "bm25") when the
    mode orders by that search alone, else a name of STAGE_ORDERS.
    `describe(settings)`: what the order's score is, in a report's words ("Final order by").
    `fuses`: the order follows the fusion settings (fusion, rrf_k, dense_weight), which do nothing elsewhere.
    `dense_first`: the order is dense's list followed by other hits, so without a reranker it scores as dense
    wherever dense's candidates fill the list (the report says so).
    """

    dense: bool
    bm25: bool
    stage: Callable[[RetrievalSettings], str]
    describe: Callable[[RetrievalSettings], str]
    fuses: bool = False
    dense_first: bool = False


def fusion_text(settings: RetrievalSettings) -> str:
    """How hybrid mode fuses, in a report's words."""
    if settings.fusion == "convex":
        weight = float(settings.dense_weight)
        return f"convex fusion of min-max-normalised scores ({weight:g} x dense + {1 - weight:g} x BM25)"
    return f"RRF (k={settings.rrf_k})"


# The retrieval modes by name: every module asks this table what a mode uses (`mode_of`), so a new mode is one entry
# here (plus its stage's ordering function when no stage orders as it does), and a name missing here is an error,
# never another mode's behaviour.
MODES: dict[str, Mode] = {
    "dense": Mode(dense=True, bm25=False, stage=lambda s: "dense", describe=lambda s: "cosine similarity (dense)"),
    "bm25": Mode(dense=False, bm25=True, stage=lambda s: "bm25", describe=lambda s: "BM25 score"),
    "hybrid": Mode(dense=True, bm25=True, stage=lambda s: s.fusion, describe=fusion_text, fuses=True),  # RRF/convex
    "union": Mode(dense=True, bm25=True, stage=lambda s: "union", dense_first=True,
                  describe=lambda s: "dense results, then new BM25 hits (score 1/position)"),
}


def mode_of(name: object) -> Mode:
    """The entry of the retrieval mode `name`, or a RAGError naming the modes there are."""
    if not isinstance(name, str) or name not in MODES:
        raise RAGError(f"unknown retrieval mode {name!r}; use one of {', '.join(MODES)}")
    return MODES[name]


def check_mode(name: object) -> str:
    """`name` if MODES has it, else mode_of's RAGError."""
    mode_of(name)
    return name


def check_rank_by(unit: object) -> str:
    """`unit`, or a RAGError naming the units there are."""
    if unit not in RANK_UNITS:
        raise RAGError(f"unknown ranking unit {unit!r}; use one of {', '.join(RANK_UNITS)}")
    return unit


def check_fusion(fusion: object, dense_weight: object, document_prior: object = 0.0) -> None:
    """A RAGError naming what is valid when `fusion` is unknown, `dense_weight` is not within [0, 1] or
    `document_prior` is not a number of at least 0."""
    def number(value: object) -> bool:
        return not isinstance(value, bool) and isinstance(value, (int, float)) and value == value

    if fusion not in FUSIONS:
        raise RAGError(f"unknown fusion {fusion!r}; use one of {', '.join(FUSIONS)}")
    if not number(dense_weight) or not 0 <= dense_weight <= 1:
        raise RAGError(f"the dense weight of convex fusion must be a number from 0 to 1, got {dense_weight!r}")
    if not number(document_prior) or document_prior < 0:
        raise RAGError(f"the document prior's weight must be a number of at least 0 (0 turns it off), got "
                       f"{document_prior!r}")


def significant_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """`settings` less those at the value indexes had before the setting was recorded: names, digests and logs
    derived from them stay as they were for every index that does not use a newer setting."""
    return {key: value for key, value in settings.items()
            if key not in UNRECORDED_SETTINGS or value != UNRECORDED_SETTINGS[key]}


def collection_name(settings: dict) -> str:
    """Server collection name derived from the index settings, so two configurations never share one.

    Only the REBUILD_SETTINGS name it: another BM25 stemmer reuses the same stored vectors."""
    embedded = {key: settings[key] for key in REBUILD_SETTINGS}
    digest = hashlib.sha256(json.dumps(embedded, sort_keys=True).encode("utf-8")).hexdigest()[:12]
    return f"localrag-{digest}"


def resolve_settings(requested: dict, stored: dict, defaults: dict) -> dict:
    """Each rebuild setting: the caller's choice, else the index's, else the default; RAGError when invalid."""
    built = stored if not stored else {**UNRECORDED_SETTINGS, **stored}
    defaults = {**UNRECORDED_SETTINGS, **defaults}
    settings = {key: (requested[key] if requested.get(key) is not None else built.get(key, defaults[key]))
                for key in REBUILD_SETTINGS + BM25_SETTINGS}
    try:
        check_stemmer(settings["bm25_stemmer"])
    except ValueError as exc:
        raise RAGError(f"{exc} (BM25_STEMMER in local_rag.py, or --bm25-stemmer)") from None
    if settings["pdf_loader"] not in PDF_LOADERS:
        raise RAGError(f"unknown PDF loader {settings['pdf_loader']!r}; use one of {', '.join(PDF_LOADERS)}")
    if settings["chunk_size"] == PAGE_CHUNKS:
        return _page_settings(settings, requested, stored, defaults)
    if not isinstance(settings["chunk_size"], int):
        raise RAGError(f"chunk size must be a number of characters or {PAGE_CHUNKS!r}, got "
                       f"{settings['chunk_size']!r}")
    if settings["chunk_size"] < 1 or settings["chunk_overlap"] < 0:
        raise RAGError(f"chunk size must be at least 1 and chunk overlap at least 0 characters, got size "
                       f"{settings['chunk_size']} and overlap {settings['chunk_overlap']}")
    if settings["chunk_overlap"] >= settings["chunk_size"]:
        raise RAGError(f"chunk overlap {settings['chunk_overlap']} must be smaller than the chunk size "
                       f"{settings['chunk_size']}")
    return settings


def _page_settings(settings: dict, requested: dict, stored: dict, defaults: dict) -> dict:
    """Whole-page chunks: no overlap (an explicit other one is a RAGError) and the page limit of PAGE_SETTINGS."""
    if requested.get("chunk_overlap") not in (None, 0):
        raise RAGError(f"whole-page chunks (chunk size {PAGE_CHUNKS!r}) have no overlap, got chunk overlap "
                       f"{requested['chunk_overlap']}; leave the overlap out or give 0")
    limit = next((source["page_chunk_limit"] for source in (requested, stored, defaults)
                  if source.get("page_chunk_limit") is not None), None)
    if not isinstance(limit, int) or limit < 1:
        raise RAGError(f"the page chunk limit must be a positive number of characters, got {limit!r}")
    return dict(settings, chunk_overlap=0, page_chunk_limit=limit)


def text_splitter(settings: dict):
    """The splitter of one page's text: chunk_size characters with chunk_overlap, or with whole-page chunks the
    page in one piece unless it is longer than page_chunk_limit (then pieces of at most that, no overlap)."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    if settings["chunk_size"] == PAGE_CHUNKS:
        return RecursiveCharacterTextSplitter(chunk_size=settings["page_chunk_limit"], chunk_overlap=0)
    return RecursiveCharacterTextSplitter(chunk_size=settings["chunk_size"], chunk_overlap=settings["chunk_overlap"])
