"""Build or incrementally update the index: `python add_pdfs.py [PDF or folder ...]`.

With no paths it syncs the folder the index follows (DOCS_PATH for a new index). Unchanged files are neither
re-read nor re-embedded; a change of model, loader, chunking or chunk headers rebuilds everything and says so.

Exit codes: 0 every file indexed; 1 some files failed or were skipped (the index is updated for the rest and
the summary names them); 2 nothing done: a usage or input error, a locked, damaged, foreign or read-only index,
or a full disk (the message says which and what to do); 130 interrupted.
"""
from __future__ import annotations

import argparse
import sys

import local_rag
from local_rag import LocalRAG, RAGError
from localrag import cli
from localrag.settings import IndexSettings, parse_chunk_size, profile_filling


# The examples at the end of --help: real commands, run from the project folder.
HELP_EXAMPLES = (
    ("python add_pdfs.py", f"sync the folder the index follows ({local_rag.DOCS_PATH} for a new index) into "
                           f"{local_rag.VECTORSTORE_PATH}"),
    ("python add_pdfs.py ~/papers --index ~/papers-index", "index the PDFs of ~/papers into an index of their own"),
    ("python add_pdfs.py eval/docs --index /tmp/index-800 --chunk-size 800",
     "a second index of the sample PDFs, with chunks of 800 characters, beside the default one"),
)


def build_parser() -> argparse.ArgumentParser:
    parser = cli.new_parser(__doc__, HELP_EXAMPLES)
    parser.add_argument("paths", nargs="*", default=None,
                        help=f"PDF files or folders to index; the index then holds exactly these (default: the "
                             f"folder the index follows, else {local_rag.DOCS_PATH})")
    parser.add_argument("--quiet", action="store_true", help="no progress bars or notes on stderr")
    cli.add_download_flag(parser, vars(local_rag), reranker=False)
    index = parser.add_argument_group("index")
    index.add_argument("--index", default=local_rag.VECTORSTORE_PATH, help="index folder")
    index.add_argument("--chroma-url", default=local_rag.CHROMA_URL,
                       help="http://HOST:PORT of a shared Chroma server instead of the local --index folder "
                            "(default: none)")
    index.add_argument("--rebuild", action="store_true",
                       help="drop the index and build it from scratch; a damaged manifest is moved aside")
    index.add_argument("--switch-folder", action="store_true",
                       help="let the index follow the given paths instead of the folder it follows now")
    index.add_argument("--allow-empty", action="store_true",
                       help="let a folder without PDFs empty an index that has files")
    index.add_argument("--no-wait", action="store_true",
                       help="fail at once when another process is writing the index, instead of waiting for it")
    index.add_argument("--check-store", action="store_true",
                       help="read the whole store back to check it against the manifest before syncing, even where "
                            "the vector file records that nothing changed since the last such read")
    cli.add_ivf_flags(index, vars(local_rag), probes=False)
    index.add_argument("--profile", choices=sorted(local_rag.PROFILES), default=None,
                       help="build with a preset's index settings, PROFILES in local_rag.py: long-pdf keeps whole "
                            "pages as chunks; a flag given beside it wins (default: none)")
    chunks = parser.add_argument_group("extraction, chunking and embedding",
                                       "stored in the index; a change rebuilds it")
    cli.add_index_setting_flags(chunks, vars(local_rag),
                                offline_models=local_rag.OFFLINE_EMBEDDING_MODELS,
                                bm25_note="; a change rebuilds only the BM25 arrays")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    defaults = [("--index", "index", local_rag.VECTORSTORE_PATH)] if args.index == local_rag.VECTORSTORE_PATH else []
    defaults += [("a folder of PDFs", "docs folder", local_rag.DOCS_PATH)] if defaults and not args.paths else []
    if problem := cli.project_folder_problem(local_rag.PROJECT_DIR, defaults):
        print(f"error: {problem}", file=sys.stderr)
        return 2
    try:
        # The flags given win over --profile's preset, which wins over the index's settings.
        filled = profile_filling(local_rag.PROFILES.get(args.profile or "", {}), lambda option: getattr(args, option, None))
        chunk_size = filled.get("chunk_size") if args.chunk_size is None else parse_chunk_size(args.chunk_size)
    except ValueError as exc:
        print(f"error: --chunk-size {exc}", file=sys.stderr)
        return 2
    except RAGError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    index = IndexSettings.from_options({**vars(args), **filled, "chunk_size": chunk_size})
    try:
        rag = LocalRAG(args.index, reranker_model=None, index=index, quiet=args.quiet, chroma_url=args.chroma_url,
                       ivf_min_chunks=args.ivf_min_chunks, ivf_lists=args.ivf_lists,
                       allow_downloads=args.allow_downloads, check_store=args.check_store)
        paths = args.paths or rag.followed_paths or [local_rag.DOCS_PATH]
        report = rag.sync(paths, rebuild=args.rebuild, progress=not args.quiet, wait=not args.no_wait,
                          switch_folder=args.switch_folder, allow_empty=args.allow_empty)
    except RAGError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: the index holds every file that was completely indexed; run again to finish",
              file=sys.stderr)
        return 130
    repaired = {name for name, _ in report.repaired}  # named below with the reason
    for label, name in report.file_lines():
        if name not in repaired:
            print(f"{label}: {name}")
    for name, reason in report.failed:
        print(f"failed: {name}: {reason}")
    for name, reason in report.skipped:
        print(f"skipped: {name}: {reason}")
    for name, reason in report.repaired:
        print(f"repaired: {name}: {reason}")
    print(report.summary())
    return 1 if report.failed or report.skipped else 0


if __name__ == "__main__":
    cli.exit_with(main)
