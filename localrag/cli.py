"""What the two command lines (add_pdfs.py, eval_retrieval.py) share: how a parser is made and shows its help."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, Callable, Mapping, NoReturn, Sequence

from localrag.settings import index_setting_fields

EXIT_PIPE_CLOSED = 141  # 128 + SIGPIPE: how a shell reports a program whose output pipe was closed early


def exit_with(main: Callable[[], int]) -> NoReturn:
    """sys.exit(main()), without a traceback when the reader of stdout went away early (`... | head`): what the
    run wrote to files is written; it exits EXIT_PIPE_CLOSED."""
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:
        # Python would fail once more flushing stdout at exit: point it at nothing (the documented recipe).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = EXIT_PIPE_CLOSED
    sys.exit(code)


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Appends "(default: X)" except to flags whose None default means "the index's" and to help that already
    names its default; their help says so."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        """A text of several lines (the examples of an epilog) as written; one line is wrapped to the width."""
        if "\n" in text:
            return "\n".join(indent + line if line else "" for line in text.splitlines())
        return super()._fill_text(text, width, indent)

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or "(default: " in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


def examples_epilog(examples: Sequence[tuple[str, str]]) -> str:
    """The epilog of --help: each example command on its own line, what it does indented below it."""
    return "examples:\n" + "\n".join(f"  {command}\n      {what}" for command, what in examples)


def new_parser(script_doc: str, examples: Sequence[tuple[str, str]] = ()) -> argparse.ArgumentParser:
    """A parser described by the first line of the script's docstring, with HelpFormatter; `examples` (command,
    what it does) are shown after the flags (examples_epilog).

    A shortened flag is an error, never another flag: argparse's abbreviations would read "--output" as
    --output-name.
    """
    return argparse.ArgumentParser(description=script_doc.splitlines()[0], formatter_class=HelpFormatter,
                                   allow_abbrev=False, epilog=examples_epilog(examples) if examples else None)


def add_index_setting_flags(group: argparse._ArgumentGroup, defaults: Mapping[str, Any], *,
                            offline_models: Sequence[str], bm25_note: str = "") -> None:
    """A flag for each index setting (settings.IndexSettings, in the flags' order), each defaulting to the index's,
    else `defaults` (local_rag.py's constants: CHUNK_SIZE, ...); `bm25_note` is appended to --bm25-stemmer's help."""
    extra_help = {"embedding_model": f"; offline without a download: {' and '.join(offline_models)}, the second one "
                                     f"multilingual, for German text",
                  "bm25_stemmer": bm25_note}
    for setting in index_setting_fields():
        meta = setting.metadata
        flag = f"--{(meta['option'] or setting.name).replace('_', '-')}"
        help = f"{meta['help']}{extra_help.get(setting.name, '')} " \
               f"(default: the index's, else {defaults[meta['constant']]})"
        if meta["parse"] is bool:
            group.add_argument(flag, action=argparse.BooleanOptionalAction, default=None, help=help)
        else:
            group.add_argument(flag, default=None, choices=meta["choices"],
                               type=int if meta["parse"] is int else None, help=help)


def add_ivf_flags(group: argparse._ArgumentGroup, defaults: Mapping[str, Any], *, probes: bool) -> None:
    """--ivf-min-chunks and --ivf-lists (kept in the manifest once given), and with `probes` --ivf-probes, with
    local_rag.py's IVF_* values as defaults (`defaults`: its module namespace)."""
    group.add_argument("--ivf-min-chunks", type=int, default=None, metavar="N",
                       help=f"give a shelf of N chunks or more an IVF for approximate dense search; smaller shelves "
                            f"are searched exactly (default: as recorded in the index, else IVF_MIN_CHUNKS "
                            f"{defaults['IVF_MIN_CHUNKS']:,})")
    group.add_argument("--ivf-lists", type=int, default=None, metavar="N",
                       help=f"lists of that IVF, 0 for 4 x the square root of the chunk count (default: as "
                            f"recorded in the index, else IVF_LISTS {defaults['IVF_LISTS']})")
    if probes:
        group.add_argument("--ivf-probes", type=int, default=defaults["IVF_PROBES"], metavar="N",
                           help="IVF lists one dense search reads, 0 for an eighth of them; all lists give exact "
                                "search's list (default: %(default)s)")


def add_download_flag(group: argparse._ArgumentGroup, defaults: Mapping[str, Any], *, reranker: bool) -> None:
    """--allow-downloads (default: ALLOW_DOWNLOADS of `defaults`, local_rag.py's namespace); with `reranker` its
    help says what becomes of the default reranker without it."""
    default = "the default reranker is then off, and the report says why; any other " if reranker else "a "
    group.add_argument("--allow-downloads", action="store_true", default=None,
                       help=f"download from huggingface.co, once, a model that is not on this machine: no such "
                            f"folder or pip package, not in the local Hugging Face cache. Without it nothing is "
                            f"downloaded: {default}model that is not here is an error naming it. HF_HUB_OFFLINE=1 "
                            f"forbids downloads all the same (default: ALLOW_DOWNLOADS in local_rag.py, "
                            f"{defaults['ALLOW_DOWNLOADS']})")


def project_folder_problem(project: Path, defaults: Sequence[tuple[str, str, str]]) -> str | None:
    """'run from the project folder X ...' when the working folder is not the project folder and a default path
    the run relies on ((flag, what, path), relative, so read from the working folder) is missing here but is in
    the project folder: the run would miss the user's files and say something else. None when it can go on."""
    here = Path.cwd().resolve()
    if here == project.resolve():
        return None
    for flag, what, path in defaults:
        if not Path(path).is_absolute() and not Path(path).exists() and (project / path).exists():
            return (f"run from the project folder {project} (cd {project}): the default {what} {path} is read "
                    f"from the working folder, and {here} has none; or give {flag}")
    return None
