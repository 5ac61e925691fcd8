"""Tests of the add_pdfs.py command line: exit codes, stdout summary, named failures, --quiet, --help."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import write_pdf

import add_pdfs
import local_rag

SUMMARY = re.compile(r"files added (\d+) / updated (\d+) / removed (\d+) / unchanged (\d+) / failed (\d+); "
                     r"(\d+) pages and (\d+) chunks embedded; \d+\.\d s")


def summary_counts(line: str) -> tuple[int, ...]:
    """(added, updated, removed, unchanged, failed, pages, chunks) of a summary line; fails on any other line."""
    match = SUMMARY.fullmatch(line)
    assert match, f"not a summary line: {line!r}"
    return tuple(int(group) for group in match.groups())


def run(capsys, *argv: str) -> tuple[int, list[str], str]:
    """(exit code, stdout lines, stderr) of one in-process run."""
    capsys.readouterr()
    code = add_pdfs.main(list(argv))
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    """good.pdf (1 page), scan.pdf (a text page and an image-only page) and corrupt.pdf (random bytes)."""
    folder = tmp_path / "docs"
    write_pdf(folder / "good.pdf", ["A good page about glaciers and ice."])
    write_pdf(folder / "scan.pdf", ["A scanned report with an appendix.", None])
    (folder / "corrupt.pdf").write_bytes(b"%PDF-1.4\n" + bytes(range(256)) * 8)
    return folder


def test_a_shortened_flag_is_an_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        add_pdfs.main(["--embedding", "onnx"])  # --embedding-model or --embedding-backend? Neither.
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.endswith("error: unrecognized arguments: --embedding\n")


def test_help_lists_every_flag_with_its_default(capsys):
    with pytest.raises(SystemExit) as exit_info:
        add_pdfs.main(["--help"])
    assert exit_info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps lines; compare word by word
    expected = {
        "--index": f"(default: {local_rag.VECTORSTORE_PATH})",
        "--loader": f"(default: the index's, else {local_rag.PDF_LOADER})",
        "--chunk-size": f"(default: the index's, else {local_rag.CHUNK_SIZE})",
        "--chunk-overlap": f"(default: the index's, else {local_rag.CHUNK_OVERLAP})",
        "--page-chunk-limit": f"(default: the index's, else {local_rag.PAGE_CHUNK_LIMIT})",
        "--chunk-headers": f"(default: the index's, else {local_rag.CHUNK_HEADERS})",
        "--no-chunk-headers": f"(default: the index's, else {local_rag.CHUNK_HEADERS})",
        "--chunk-context": f"(default: the index's, else {local_rag.CHUNK_CONTEXT})",
        "--no-chunk-context": f"(default: the index's, else {local_rag.CHUNK_CONTEXT})",
        "--embedding-model": f"(default: the index's, else {local_rag.EMBEDDING_MODEL})",
        "--chroma-url": "(default: none)",
        "--profile": "(default: none)",
        "--embedding-backend": f"(default: the index's, else {local_rag.EMBEDDING_BACKEND})",
        "--bm25-stemmer": f"(default: the index's, else {local_rag.BM25_STEMMER})",
        "--rebuild": "(default: False)",
        "--switch-folder": "(default: False)",
        "--allow-empty": "(default: False)",
        "--no-wait": "(default: False)",
        "--check-store": "(default: False)",
        "--ivf-min-chunks": f"(default: as recorded in the index, else IVF_MIN_CHUNKS {local_rag.IVF_MIN_CHUNKS:,})",
        "--ivf-lists": f"(default: as recorded in the index, else IVF_LISTS {local_rag.IVF_LISTS})",
        "--quiet": "(default: False)",
        "--allow-downloads": f"(default: ALLOW_DOWNLOADS in local_rag.py, {local_rag.ALLOW_DOWNLOADS})",
    }
    flags = {flag for action in add_pdfs.build_parser()._actions for flag in action.option_strings}
    assert flags - {"-h", "--help"} == set(expected)  # a new flag must be added here, with its default
    for flag, default in expected.items():
        assert re.search(rf"{re.escape(flag)}\b[^(]*{re.escape(default)}", text), flag
    assert f"(default: the folder the index follows, else {local_rag.DOCS_PATH})" in text  # the positional paths
    assert "(default: None)" not in text  # "the index's" defaults are said in words, not as None


def test_help_groups_the_flags():
    groups = {group.title: [action.option_strings[0] if action.option_strings else action.dest
                            for action in group._group_actions]
              for group in add_pdfs.build_parser()._action_groups}
    assert groups == {
        "positional arguments": ["paths"],
        "options": ["-h", "--quiet", "--allow-downloads"],
        "index": ["--index", "--chroma-url", "--rebuild", "--switch-folder", "--allow-empty", "--no-wait",
                  "--check-store", "--ivf-min-chunks", "--ivf-lists", "--profile"],
        "extraction, chunking and embedding": ["--loader", "--chunk-size", "--page-chunk-limit", "--chunk-overlap",
                                               "--chunk-headers", "--chunk-context", "--embedding-model",
                                               "--embedding-backend",
                                               "--bm25-stemmer"],
    }

def test_summary_and_named_failures(capsys, docs, tmp_path):
    index = str(tmp_path / "index")
    code, out, err = run(capsys, str(docs), "--index", index)
    assert code == 1  # some files failed: the index is updated for the rest
    assert len(out) == 4 and out[:2] == ["added: good.pdf", "added: scan.pdf"]
    assert out[2].startswith("failed: corrupt.pdf: not a readable PDF (")
    # good.pdf (1 page) and scan.pdf (2 pages, one empty) are indexed: 3 pages, 2 chunks; corrupt.pdf failed.
    assert summary_counts(out[3]) == (2, 0, 0, 0, 1, 3, 2)
    assert "skipped corrupt.pdf: not a readable PDF" in err
    assert "note: scan.pdf page 2 has no text layer (image only?); it cannot be retrieved" in err

    code, out, err = run(capsys, str(docs), "--index", index)
    assert code == 1
    assert out[0].startswith("failed: corrupt.pdf: not a readable PDF (") and \
        out[0].endswith(" (unchanged since last sync)")
    assert summary_counts(out[1]) == (0, 0, 0, 2, 1, 0, 0)

    write_pdf(docs / "good.pdf", ["A good page about glaciers, ice and snow."])
    (docs / "scan.pdf").unlink()
    write_pdf(docs / "new.pdf", ["A new page about rivers."])
    code, out, err = run(capsys, str(docs), "--index", index, "--quiet")
    assert code == 1
    assert out[:3] == ["added: new.pdf", "updated: good.pdf", "removed: scan.pdf"]
    assert summary_counts(out[4]) == (1, 1, 1, 0, 1, 2, 2)


def test_exit_1_when_every_file_fails_also_on_the_second_run(capsys, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "corrupt.pdf").write_bytes(b"not a pdf at all")
    write_pdf(docs / "image_only.pdf", [None])
    for _ in range(2):  # the second run must not count the unchanged failures as "unchanged" successes
        code, out, _ = run(capsys, str(docs), "--index", str(tmp_path / "index"), "--quiet")
        assert code == 1
        assert [line.split(":")[1].strip() for line in out[:-1]] == ["corrupt.pdf", "image_only.pdf"]
        assert summary_counts(out[-1])[:5] == (0, 0, 0, 0, 2)


def test_exit_2_on_errors_the_user_can_fix(capsys, tmp_path):
    index = tmp_path / "index"
    code, out, err = run(capsys, str(tmp_path / "missing"), "--index", str(index))
    assert code == 2 and out == []
    assert err == f"error: {tmp_path / 'missing'} does not exist; give a PDF file or a folder of PDFs\n"
    assert not index.exists()

    code, _, err = run(capsys, str(tmp_path), "--index", str(index), "--chunk-size", "0")
    assert code == 2 and err == "error: --chunk-size must be a positive number of characters or 'page' (one chunk per " \
                                "page), got '0'\n"
    code, _, err = run(capsys, str(tmp_path), "--index", str(index), "--chunk-overlap", "-5")
    assert code == 2 and "overlap -5" in err
    code, _, err = run(capsys, str(tmp_path), "--index", str(index), "--chunk-size", "100", "--chunk-overlap", "100")
    assert code == 2 and err == "error: chunk overlap 100 must be smaller than the chunk size 100\n"
    assert not index.exists()
    with pytest.raises(SystemExit) as exit_info:  # argparse rejects an unknown loader itself
        add_pdfs.main([str(tmp_path), "--loader", "tesseract"])
    assert exit_info.value.code == 2


def test_rebuild_and_settings_change_say_why(capsys, docs, tmp_path):
    index = str(tmp_path / "index")
    assert run(capsys, str(docs), "--index", index)[0] == 1
    code, out, err = run(capsys, str(docs), "--index", index, "--rebuild")
    assert code == 1
    assert "Rebuilding the whole index (--rebuild was given)" in err
    assert summary_counts(out[-1]) == (2, 0, 0, 0, 1, 3, 2)  # everything indexed again; corrupt.pdf tried again
    code, out, err = run(capsys, str(docs), "--index", index, "--chunk-size", "500", "--chunk-overlap", "50")
    assert "Rebuilding the whole index (settings changed: chunk_size: index has 2000, requested 500; " \
           "chunk_overlap: index has 200, requested 50)" in err
    assert summary_counts(out[-1])[:5] == (2, 0, 0, 0, 1)


def test_interrupt_exits_130_and_the_next_run_finishes(capsys, docs, tmp_path, monkeypatch):
    from langchain_huggingface import HuggingFaceEmbeddings

    def ctrl_c(self, texts):
        raise KeyboardInterrupt

    original = HuggingFaceEmbeddings.embed_documents
    monkeypatch.setattr(HuggingFaceEmbeddings, "embed_documents", ctrl_c)
    index = str(tmp_path / "index")
    code, out, err = run(capsys, str(docs), "--index", index, "--quiet")
    assert code == 130 and out == []
    assert err == ("interrupted: the index holds every file that was completely indexed; "
                   "run again to finish\n")
    monkeypatch.setattr(HuggingFaceEmbeddings, "embed_documents", original)
    code, out, _ = run(capsys, str(docs), "--index", index, "--quiet")
    assert code == 1 and summary_counts(out[-1])[:5] == (2, 0, 0, 0, 1)


def test_quiet_silences_stderr(capfd, docs, tmp_path):
    from transformers.utils import logging as hf_logging

    # Make the check able to fail: load the model inside main (its "Loading weights" bar) with bars on, and
    # use pypdf, which logs "EOF marker not found" for corrupt.pdf; two files run in forked workers (fd 2).
    bars_were_on = hf_logging.is_progress_bar_enabled()
    hf_logging.enable_progress_bar()
    local_rag.load_embeddings.cache_clear()
    try:
        code = add_pdfs.main([str(docs), "--index", str(tmp_path / "quiet"), "--quiet", "--loader", "pypdf"])
        out, err = capfd.readouterr()
    finally:
        (hf_logging.enable_progress_bar if bars_were_on else hf_logging.disable_progress_bar)()
    assert code == 1
    assert err == ""
    lines = out.splitlines()
    assert lines[2].startswith("failed: corrupt.pdf: not a readable PDF (")
    assert summary_counts(lines[3]) == (2, 0, 0, 0, 1, 3, 2)
    info = json.loads((tmp_path / "quiet" / "index_info.json").read_text(encoding="utf-8"))
    assert info["settings"]["pdf_loader"] == "pypdf"

    # The same run without --quiet does write its notes to stderr.
    assert add_pdfs.main([str(docs), "--index", str(tmp_path / "loud"), "--loader", "pypdf"]) == 1
    err = capfd.readouterr().err
    assert "skipped corrupt.pdf" in err and "note: scan.pdf page 2 has no text layer" in err


@pytest.mark.parametrize("damaged", [b"", b"PK\x03\x04 a zip cut short"])
def test_a_damaged_ivf_file_is_built_again_by_the_next_run(capsys, tiny_index, tmp_path, damaged):
    """An empty (EOFError) or truncated (BadZipFile) ivf.npz ended this run in a traceback from ivf.is_current."""
    import shutil

    docs, index = shutil.copytree(tiny_index[0], tmp_path / "docs"), shutil.copytree(tiny_index[1], tmp_path / "index")
    code, out, _ = run(capsys, "--index", str(index), "--ivf-min-chunks", "1", "--quiet")
    ivf_file = index / "ivf.npz"
    assert code == 0 and summary_counts(out[-1]) == (0, 0, 0, 4, 0, 0, 0) and ivf_file.exists()
    built = ivf_file.read_bytes()
    ivf_file.write_bytes(damaged)
    code, out, err = run(capsys, "--index", str(index), "--quiet")
    why = "EOFError: No data left in file" if not damaged else "BadZipFile: File is not a zip file"
    assert (code, err) == (0, f"warning: the IVF file {ivf_file} cannot be read ({why}); building it again\n")
    assert summary_counts(out[-1]) == (0, 0, 0, 4, 0, 0, 0) and ivf_file.read_bytes() == built  # seeded: same file
    assert json.loads((index / "index_info.json").read_text(encoding="utf-8"))["dense_search"]["method"] == "ivf"
    assert docs.exists()
