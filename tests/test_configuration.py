"""The configuration a report records (what the settings asked for and what ran), and when a run may replace the
committed baseline (localrag/runs/config_block.py's rule, applied by eval_runs.keep_complete_reports).

The rule: a run replaces eval/baseline.* when it is a complete run of the baseline's configuration, or of settings
the user changed. It is refused, and written under eval/runs/ with the reason, when the same asked-for settings ran
another configuration on this machine (a reranker present here and absent there, another CPU's embedding export;
--replace-baseline overrides), and when its judge section is incomplete (nothing overrides).

The project is a temporary folder laid out like the real one (eval/goldset.csv, eval/baseline.txt, eval/runs/),
over a copy of the tiny corpus and its index; each test has a Hugging Face cache of its own (`hf_cache`), where a
tiny cross-encoder stands for "the default reranker is downloaded".
"""
from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path

import pytest
from conftest import put_in_hf_cache

import eval_retrieval as er
import local_rag
from localrag.models import llm
from localrag.runs.config_block import baseline_refusal, difference_name
from openai_stub import OpenAIStub, closed_port

DEFAULT = "cross-encoder/ms-marco-MiniLM-L-6-v2"
OFF = f"{DEFAULT} is not downloaded: not in the local Hugging Face cache; --allow-downloads fetches it once"
GOLD = ("question,expected_source,expected_page\n"
        "How sensitive is the option value to volatility?,options.pdf,1\n"
        "How do crops react to rainfall?,weather.pdf,1\n"
        "Wie reagiert die Familie auf Gregor Samsa?,Literatur_Übersicht.pdf,1\n")
REFUSED_ON = (f"the reranker {DEFAULT} ran here but was off in the committed report ({OFF}): the same settings ran "
              f"another configuration on this machine")


# ----------------------------------------------------------------------------- the rule, by hand

BASE = {"index": "eval/index", "embedding_model": "all-MiniLM-L6-v2", "embedding_backend": "torch",
        "chunk_size": 2000, "retrieval_mode": "hybrid", "rrf_k": 1, "page_tolerance": 1}
RERANK_OFF = {**BASE, "reranker": None, "reranker_asked": DEFAULT, "reranker_off_reason": OFF}  # not downloaded
RERANK_ON = {**BASE, "reranker": DEFAULT, "reranker_asked": DEFAULT}
NO_RERANK = {**BASE, "reranker": None, "reranker_asked": None}  # --no-rerank, RERANKER_MODEL = None


def test_the_same_asked_for_settings_run_elsewhere_may_not_replace():
    assert baseline_refusal(RERANK_OFF, RERANK_OFF) is None
    assert baseline_refusal(RERANK_OFF, RERANK_ON) == (f"the reranker {DEFAULT} ran here but was off in the committed "
                                                       f"report ({OFF})")
    assert difference_name(RERANK_OFF, RERANK_ON) == "reranker-on"
    assert baseline_refusal(RERANK_ON, RERANK_OFF) == (f"the reranker {DEFAULT} ran for the committed report but is "
                                                       f"off here ({OFF})")
    assert difference_name(RERANK_ON, RERANK_OFF) == "reranker-off"
    # The trap: a changed setting elsewhere does not explain the reranker; that part is still the machine's.
    assert baseline_refusal(RERANK_OFF, {**RERANK_ON, "chunk_size": 1000}) == baseline_refusal(RERANK_OFF, RERANK_ON)


def test_a_changed_setting_replaces():
    assert baseline_refusal(RERANK_OFF, {**RERANK_OFF, "chunk_size": 1000, "rrf_k": 60}) is None
    assert baseline_refusal(RERANK_ON, NO_RERANK) is None  # reranking turned off by the user
    assert baseline_refusal(NO_RERANK, RERANK_ON) is None  # and on again
    assert baseline_refusal(RERANK_ON, {**BASE, "reranker": "models/mine", "reranker_asked": "models/mine"}) is None
    assert difference_name(RERANK_ON, NO_RERANK) == ""


def test_a_report_written_before_reranker_asked_counts_as_asking_for_what_may_have_been_off():
    old = {**BASE, "reranker": None}  # the committed baseline before this change: off, for whatever reason
    assert baseline_refusal(old, RERANK_ON) == (f"the reranker {DEFAULT} ran here but was off in the committed "
                                                f"report (it did not run there)")
    assert baseline_refusal(old, RERANK_OFF) is None and baseline_refusal(old, NO_RERANK) is None
    assert baseline_refusal({**BASE, "reranker": DEFAULT}, RERANK_OFF) == (
        f"the reranker {DEFAULT} ran for the committed report but is off here ({OFF})")


def test_another_cpus_embedding_export_may_not_replace():
    int8 = {**RERANK_OFF, "embedding_backend": "onnx-int8", "embedding_export": "onnx-int8-avx2"}
    vnni = {**int8, "embedding_export": "onnx-int8-avx512_vnni"}
    export = ("the embedding model all-MiniLM-L6-v2 ran as the export onnx-int8-avx512_vnni here and as onnx-int8-avx2 "
              "for the committed report (the onnx-int8 backend's export depends on the CPU)")
    assert baseline_refusal(int8, vnni) == export
    assert difference_name(int8, vnni) == "embedding_export-onnx-int8-avx512_vnni"
    assert baseline_refusal(int8, {**RERANK_OFF, "embedding_backend": "torch"}) is None  # another backend, asked for
    assert baseline_refusal(int8, {**vnni, "embedding_model": "mine"}) is None  # another model, asked for
    both = {**vnni, "reranker": DEFAULT, "reranker_asked": DEFAULT}
    assert baseline_refusal(int8, both) == f"the reranker {DEFAULT} ran here but was off in the committed report " \
                                           f"({OFF}); {export}"
    assert difference_name(int8, both) == "reranker-on.embedding_export-onnx-int8-avx512_vnni"


# ----------------------------------------------------------------------------- the committed baseline, end to end


@pytest.fixture
def project(tiny_index, tmp_path, monkeypatch, hf_cache) -> Path:
    """A project folder with the default goldset, docs and index (copies), run from there; no model downloaded."""
    docs = shutil.copytree(tiny_index[0], tmp_path / "eval" / "docs")
    index = shutil.copytree(tiny_index[1], tmp_path / "eval" / "index")
    (tmp_path / "eval" / "goldset.csv").write_text(GOLD, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(er, "VECTORSTORE_PATH", str(index))
    monkeypatch.setattr(local_rag, "DOCS_PATH", str(docs))
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def run(capsys, *argv) -> tuple[int, str, str]:
    code = er.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def files(folder: Path) -> dict[str, bytes]:
    """The files directly in `folder` and their bytes; the query vector cache (conftest puts it in tmp_path) left
    out: a run stores its questions' vectors before anything else."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.glob("*"))
            if p.is_file() and not p.name.startswith("query_vectors.sqlite3")}


def line(path: str | Path, start: str) -> str:
    return next(text for text in Path(path).read_text(encoding="utf-8").splitlines() if text.startswith(start))


def settings(path: str | Path) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))["settings"]


def test_a_default_run_opens_no_connection_and_says_why_the_reranker_is_off(project, capsys, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)  # only the rule "no download unless asked" stops it now

    def refuse(address, *args, **kwargs):
        raise AssertionError(f"a connection to {address!r} was opened")

    monkeypatch.setattr(socket, "create_connection", refuse)
    code, _, err = run(capsys, "--quiet")
    assert (code, err) == (0, "")
    assert line("eval/baseline.txt", "  Reranker:") == f"  Reranker:           off ({OFF})"
    recorded = settings("eval/baseline.json")
    assert (recorded["reranker"], recorded["reranker_asked"], recorded["reranker_off_reason"]) == (None, DEFAULT, OFF)
    assert "embedding_export" not in recorded  # torch runs the model as it is: no export beside the backend


def test_a_machine_where_the_reranker_loads_writes_beside_the_baseline(project, hf_cache, tiny_cross_encoder, capsys):
    assert run(capsys, "--quiet")[0] == 0
    committed = files(project / "eval")
    put_in_hf_cache(hf_cache, DEFAULT, tiny_cross_encoder)  # this machine has the default reranker
    code, out, err = run(capsys, "--quiet")
    # stdout: the comparison with the baseline (every run says its verdict), then the metrics line.
    assert code == 0 and out.splitlines()[-2].startswith("hybrid + rerank: ")
    assert out.splitlines()[-1] == ("Wrote eval/runs/baseline.reranker-on.txt, eval/runs/baseline.reranker-on.json, "
                                    "eval/runs/baseline.reranker-on.details.md")
    assert err == (f"warning: eval/baseline.txt not replaced: {REFUSED_ON}. Reports written to "
                   f"eval/runs/baseline.reranker-on.txt and eval/runs/baseline.reranker-on.json; to make this "
                   f"configuration the baseline, run again with --replace-baseline\n")
    assert files(project / "eval") == committed  # not a byte of the baseline changed
    beside = "eval/runs/baseline.reranker-on.txt"
    assert line(beside, "  Reranker:") == f"  Reranker:           on ({DEFAULT})"
    assert line(beside, "  Not written to") == (f"  Not written to eval/baseline.txt: {REFUSED_ON}; to make this "
                                                f"configuration the baseline, run again with --replace-baseline")
    assert line(beside, "Compared to") == "Compared to previous report eval/baseline.json (3 common questions)"
    assert Path("eval/runs/baseline.reranker-on.details.md").exists()
    assert not Path("eval/runs/baseline.compare.txt").exists()  # the baseline's comparison file is the baseline's
    recorded = settings("eval/runs/baseline.reranker-on.json")
    assert (recorded["reranker"], recorded["reranker_asked"]) == (DEFAULT, DEFAULT)
    assert "reranker_off_reason" not in recorded

    # Asked for: the new configuration becomes the baseline.
    code, _, err = run(capsys, "--quiet", "--replace-baseline")
    assert (code, err) == (0, "")
    assert line("eval/baseline.txt", "  Reranker:") == f"  Reranker:           on ({DEFAULT})"

    # And a machine without the model may not turn it off behind the user's back.
    shutil.rmtree(hf_cache / f"models--{DEFAULT.replace('/', '--')}")
    local_rag.load_reranker.cache_clear()  # another process would not have it loaded
    committed = files(project / "eval")
    code, _, err = run(capsys, "--quiet")
    assert code == 0
    assert err.startswith(f"warning: eval/baseline.txt not replaced: the reranker {DEFAULT} ran for the committed "
                          f"report but is off here ({OFF}): the same settings ran another configuration on this "
                          f"machine. Reports written to eval/runs/baseline.reranker-off.txt and ")
    assert files(project / "eval") == committed


def test_changed_settings_replace_the_baseline(project, hf_cache, tiny_cross_encoder, capsys, monkeypatch):
    put_in_hf_cache(hf_cache, DEFAULT, tiny_cross_encoder)
    assert run(capsys, "--quiet")[0] == 0
    assert line("eval/baseline.txt", "  Reranker:") == f"  Reranker:           on ({DEFAULT})"
    # The user turns reranking off in local_rag.py: asked for, so it is the new baseline.
    monkeypatch.setattr(local_rag, "RERANKER_MODEL", None)
    code, _, err = run(capsys, "--quiet")
    assert (code, err) == (0, "")
    assert line("eval/baseline.txt", "  Reranker:") == "  Reranker:           off (RERANKER_MODEL is None)"
    assert (settings("eval/baseline.json")["reranker"], settings("eval/baseline.json")["reranker_asked"]) == (None,
                                                                                                            None)
    # The user edits CHUNK_SIZE for a new index (an index keeps the settings it was built with).
    monkeypatch.setattr(local_rag, "CHUNK_SIZE", 100)
    monkeypatch.setattr(local_rag, "CHUNK_OVERLAP", 10)
    monkeypatch.setattr(er, "VECTORSTORE_PATH", str(project / "eval" / "index-100"))
    code, _, err = run(capsys, "--quiet")
    assert (code, err) == (0, "")
    assert line("eval/baseline.txt", "  Chunking:") == ("  Chunking:           100 characters, overlap 10, chunk "
                                                         "headers on, without context lines")
    compare = Path("eval/runs/baseline.compare.txt").read_text(encoding="utf-8")
    assert "chunk_size 2000 → 100; chunk_overlap 200 → 10" in compare
    assert not Path("eval/runs/baseline.reranker-on.txt").exists()


# ----------------------------------------------------------------------------- a judge run


def test_a_judge_without_its_server_stops_before_any_work_and_writes_nothing(project, capsys, monkeypatch):
    """The issue's case: the run used to retry for every question, exit 1 and rewrite the baseline with "0 of 3
    judged"."""
    assert run(capsys, "--quiet")[0] == 0
    committed = files(project / "eval")
    base_url = f"http://127.0.0.1:{closed_port()}/v1"
    monkeypatch.setenv("OPENAI_BASE_URL", base_url)
    code, out, err = run(capsys, "--quiet", "--judge", "some-model")
    assert (code, out) == (2, "")
    assert err == (f"error: The judge server ({base_url}) does not answer (APIConnectionError: Connection error). "
                   f"Start it, or set OPENAI_BASE_URL to a running server, then rerun (or run without --judge). No "
                   f"report was written: 3 of 3 questions need a new verdict of some-model, which the judge cache "
                   f"eval/judge_cache.json does not hold\n")
    assert files(project / "eval") == committed and not Path("eval/runs").exists()


def test_a_degraded_judge_never_replaces_the_baseline(project, capsys, monkeypatch):
    assert run(capsys, "--quiet")[0] == 0
    committed = files(project / "eval")
    monkeypatch.setattr(llm, "MAX_RETRIES", 0)
    with OpenAIStub() as stub:
        stub.add_content('{"answering": [1], "reason": "Passage 1 defines vega."}')  # then the server fails (5xx)
        monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)
        code, _, err = run(capsys, "--quiet", "--judge", "stub-model")
        assert (len(stub.listings), len(stub.requests)) == (1, 2)  # the check, one verdict, one failed call
    assert code == 1
    why = ("the judge judged 1 of 3 questions (2 not judged, 0 unreadable), and a judge section that is not complete "
           "never replaces the committed baseline")
    assert (f"warning: eval/baseline.txt not replaced: {why}. Reports written to "
            f"eval/runs/baseline.judge-incomplete.txt and eval/runs/baseline.judge-incomplete.json; rerun when the "
            f"judge can answer (its verdicts so far are cached)\n") in err
    assert {name: data for name, data in files(project / "eval").items() if name != "judge_cache.json"} == committed
    beside = Path("eval/runs/baseline.judge-incomplete.txt").read_text(encoding="utf-8").splitlines()
    assert beside[1] == "Status: exit 1, evaluated but the run is degraded"
    assert f"  Not written to eval/baseline.txt: {why}; rerun when the judge can answer (its verdicts so far are " \
           f"cached)" in beside
    # --replace-baseline does not let an incomplete judge section in either.
    with OpenAIStub() as stub:
        monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)
        code, _, _ = run(capsys, "--quiet", "--judge", "stub-model", "--replace-baseline")
    assert code == 1
    assert {name: data for name, data in files(project / "eval").items() if name != "judge_cache.json"} == committed


@pytest.fixture
def judged(tiny_index, tmp_path, capsys, monkeypatch) -> list[str]:
    """The arguments of a judge run reporting to tmp_path/r.txt, after one complete run with a stub server."""
    docs, index = tiny_index
    (tmp_path / "gold.csv").write_text(GOLD, encoding="utf-8")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    argv = ["--goldset", tmp_path / "gold.csv", "--docs", docs, "--index", index, "--report", tmp_path / "r.txt",
            "--judge", "stub-model", "--judge-cache", tmp_path / "cache.json", "--quiet", "--no-compare"]
    with OpenAIStub() as stub:
        for n in range(3):
            stub.add_content(f'{{"answering": [{n + 1}], "reason": "r"}}')
        monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)
        assert run(capsys, *argv)[0] == 0
    return argv


def test_a_fully_cached_judge_run_needs_no_server(judged, tmp_path, capsys, monkeypatch):
    before = (tmp_path / "r.txt").read_text(encoding="utf-8")
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{closed_port()}/v1")
    assert run(capsys, *judged) == (0, ("hybrid: Hit@1 1.000, Hit@5 1.000, Hit@10 1.000, Hit@20 1.000, "
                                        "NDCG@5 1.000, NDCG@10 1.000, NDCG@20 1.000, MRR 1.000 (3 questions)\n"
                                        f"Wrote {tmp_path}/r.txt, {tmp_path}/r.json, {tmp_path}/r.details.md\n"), "")
    same = lambda text: [x for x in text.splitlines() if not x.startswith("Generated: ")]  # noqa: E731
    assert same((tmp_path / "r.txt").read_text(encoding="utf-8")) == same(before)


def test_new_passages_without_a_server_stop_after_retrieval_before_anything_is_written(judged, tmp_path, capsys,
                                                                                        monkeypatch):
    """Every question has a verdict, so the server is not checked before retrieval; fewer passages make new prompts,
    found out before judging: exit 2, the reports as they were."""
    before = files(tmp_path)
    base_url = f"http://127.0.0.1:{closed_port()}/v1"
    monkeypatch.setenv("OPENAI_BASE_URL", base_url)
    code, out, err = run(capsys, *judged, "--judge-k", "2")
    assert (code, out) == (2, "")
    assert err == (f"error: The judge server ({base_url}) does not answer (APIConnectionError: Connection error). "
                   f"Start it, or set OPENAI_BASE_URL to a running server, then rerun (or run without --judge). No "
                   f"report was written: 3 of 3 questions need a new verdict of stub-model, which the judge cache "
                   f"{tmp_path / 'cache.json'} does not hold\n")
    assert files(tmp_path) == before


def test_an_incomplete_judge_section_never_replaces_a_complete_one(judged, tmp_path, capsys, monkeypatch):
    before = files(tmp_path)
    with OpenAIStub() as stub:
        stub.add_content('{"answering": [2], "reason": "r"}')
        monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)
        code, _, err = run(capsys, *judged, "--judge-k", "2", "--judge-max-calls", "1")
    assert code == 1
    report = tmp_path / "r.judge-incomplete.txt"
    assert err.startswith(f"warning: {tmp_path / 'r.txt'} not replaced: the judge judged 1 of 3 questions (2 not "
                          f"judged, 0 unreadable), and a judge section that is not complete never replaces a complete "
                          f"one. Reports written to {report} and {report.with_suffix('.json')}; rerun when")
    assert {name: data for name, data in files(tmp_path).items() if name in before and name != "cache.json"} == \
        {name: data for name, data in before.items() if name != "cache.json"}
    assert "  degraded: the judge's call limit (--judge-max-calls 1) left 2 questions not judged; rerun to judge " \
           "them (verdicts are cached)" in report.read_text(encoding="utf-8").splitlines()
    # Without a complete section to keep (no report there yet, or an incomplete one), an incomplete run is written.
    (tmp_path / "r.txt").unlink()
    (tmp_path / "r.json").unlink()
    with OpenAIStub() as stub:
        monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)
        code, _, err = run(capsys, *judged, "--judge-k", "3", "--judge-max-calls", "0")
    assert code == 1 and "not replaced" not in err
    assert (tmp_path / "r.txt").exists()
