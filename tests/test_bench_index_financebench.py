"""bench/index_financebench.py's own logic: the cosine check and the bare embedding loop it times beside a build."""
from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

from conftest import write_corpus

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("index_financebench", ROOT / "bench" / "index_financebench.py")
index_financebench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(index_financebench)


def test_lowest_cosine_is_per_row_and_ignores_length():
    # The trap: row 0 differs only in length (cosine 1), row 1 by 45 degrees (cosine 1/sqrt 2).
    assert math.isclose(index_financebench.lowest_cosine([[1, 0], [1, 1]], [[3, 0], [1, 0]]), 1 / math.sqrt(2))
    assert index_financebench.lowest_cosine([[0.6, 0.8]], [[6, 8]]) == 1.0


def test_bare_pass_embeds_the_stored_chunks_as_the_build_did(tmp_path, capsys):
    docs = write_corpus(tmp_path / "docs")
    out = tmp_path / "out.json"
    assert index_financebench.main(["--pdfs", str(docs), "--index", str(tmp_path / "index"), "--skip-extract",
                                    "--bare", "--json", str(out)]) == 0
    results = json.loads(out.read_text(encoding="utf-8"))
    assert results["bare"]["chunks"] == results["build"]["chunks"] == 5  # every stored chunk, the scan page none
    assert results["bare"]["lowest_cosine_to_index"] > 0.99999
    table = capsys.readouterr().out
    assert "bare embedding loop" in table and "total build / bare" in table and "lowest cosine to the index" in table


def test_bare_needs_a_build_and_a_backend_it_runs(tmp_path, capsys):
    assert index_financebench.main(["--pdfs", str(tmp_path), "--skip-build", "--bare"]) == 2
    assert capsys.readouterr().err == "error: --bare times the chunks of the build it follows; leave out --skip-build\n"
    assert index_financebench.main(["--pdfs", str(tmp_path), "--bare", "--embedding-backend", "onnx"]) == 2
    assert capsys.readouterr().err == ("error: --bare runs torch and openvino-int8, not 'onnx'; leave --bare out "
                                       "for it\n")


def test_bare_over_a_build_without_chunks_exits_2_and_keeps_the_index(tmp_path, capsys):
    docs = write_corpus(tmp_path / "docs", {"scan.pdf": [None]})  # one image-only page: nothing to chunk
    index = tmp_path / "index"
    assert index_financebench.main(["--pdfs", str(docs), "--index", str(index), "--skip-extract", "--bare"]) == 2
    assert capsys.readouterr().err.endswith(
        f"error: the build stored no chunks in {index} (no page has a text layer), so --bare has nothing to embed; "
        f"leave --bare out, or give PDFs with text\n")
    assert (index / "index_info.json").is_file()
