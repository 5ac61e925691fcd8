"""Answer-level evaluation end to end (eval_retrieval.py --answers / --answer-model) against a scripted server:
the report's Answers section to the letter, exit codes, a cached rerun without calls, an unreadable reply."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import eval_retrieval as er
from localrag.evaluation.answer_prompts import REFUSAL
from openai_stub import OpenAIStub, closed_port

GOLD = ("question,expected_source,expected_page,answer\n"
        "How sensitive is the option value to volatility?,options.pdf,1,Vega measures it.\n"
        "How do crops react to rainfall?,weather.pdf,1,They are sensitive to changes in rainfall.\n")
VEGA = "How sensitive is the option value to volatility?"
CROPS = "How do crops react to rainfall?"
ANSWERS = [{"question": VEGA, "answer": "Vega measures the sensitivity to volatility [options.pdf, p. 1].",
            "passages": [{"source": "options.pdf", "page": 1, "text": "Vega is the sensitivity of an option's value "
                                                                     "to the implied volatility."}]},
           {"question": CROPS, "answer": REFUSAL}]
JUDGED = ['{"verdict": "correct", "reason": "same"}', '{"supported": [true]}',
          '{"supported": true, "needed": [true], "reason": "p. 1 says it"}', '{"verdict": "refused"}']


def run(capsys, *argv) -> tuple[int, str, str]:
    code = er.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def argv(tiny_index, tmp_path, monkeypatch) -> list:
    docs, index = tiny_index
    (tmp_path / "gold.csv").write_text(GOLD, encoding="utf-8")
    (tmp_path / "answers.jsonl").write_text("".join(json.dumps(a) + "\n" for a in ANSWERS), encoding="utf-8")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    return ["--goldset", tmp_path / "gold.csv", "--docs", docs, "--index", index, "--report", tmp_path / "r.txt",
            "--answers", tmp_path / "answers.jsonl", "--judge-cache", tmp_path / "cache.json", "--quiet",
            "--no-compare", "--no-rerank"]


def section(path: Path) -> list[str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Answers: "))
    return lines[start:lines.index("", start)]


def test_answers_judged_cited_and_costed_then_a_cached_rerun_asks_nothing(argv, tmp_path, capsys, monkeypatch):
    with OpenAIStub() as stub:
        for reply in JUDGED:
            stub.add_content(reply)
        monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)
        code, _, err = run(capsys, *argv, "--answer-judge", "stub-model")
        assert len(stub.requests) == 4
    assert (code, err) == (0, "")
    answers = tmp_path / "answers.jsonl"
    assert section(tmp_path / "r.txt") == [
        f"Answers: {answers}; judged by stub-model",
        "  correct:              0.500 [0.000, 1.000] (1 of 2)",
        "  refused:              0.500 [0.000, 1.000] (1 of 2)",
        "  figures stated:       no question",
        "  faithful:             1.000 [1.000, 1.000] (1 of 1)",
        "  cites a gold page:    1.000 [1.000, 1.000] (1 of 1)",
        "  citation recall:      1.000 [1.000, 1.000] (1 of 1)",
        "  citation precision:   1.000 [1.000, 1.000] (1 of 1)",
        "  cost, judge:          4 replies, 4 prompt + 4 completion tokens",
    ]
    data = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))["answers"]
    assert [(q["correctness"], q["faithfulness_status"], q["citation_status"]) for q in data["questions"]] == [
        ("correct", "ok", "ok"), ("refused", "refused", "no passages")]
    details = (tmp_path / "r.details.md").read_text(encoding="utf-8")
    vega = data["questions"][0]["query_id"]
    assert details[details.index("## Answers"):].splitlines()[4:12] == [
        f"### {vega}: {VEGA}", "", "> Vega measures the sensitivity to volatility [options.pdf, p. 1].", "",
        "- correctness: correct (same)", "- faithfulness: 1 of 1 sentences supported (+)",
        "- citations: 1 parsed, 1 of passages it was given, 0 of others, 0 unparsed; gold page cited: yes",
        "- ALCE: 1 of 1 cited sentences supported by their citations, 1 of 1 citations needed"]
    before = (tmp_path / "r.txt").read_text(encoding="utf-8")
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{closed_port()}/v1")  # no server: all cached
    code, _, err = run(capsys, *argv, "--answer-judge", "stub-model")
    assert (code, err) == (0, "")
    same = lambda text: [x for x in text.splitlines() if not x.startswith("Generated: ")]  # noqa: E731
    assert same((tmp_path / "r.txt").read_text(encoding="utf-8")) == same(before)


def test_an_unreadable_reply_is_listed_and_degrades_the_run(argv, tmp_path, capsys, monkeypatch):
    with OpenAIStub() as stub:
        stub.add_content("The answer is correct.")  # no JSON: the small model broke its format
        for reply in JUDGED[1:]:
            stub.add_content(reply)
        monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)
        code, _, err = run(capsys, *argv, "--answer-judge", "stub-model")
    assert code == 1
    lines = section(tmp_path / "r.txt")
    assert lines[1] == "  correct:              0.000 [0.000, 0.000] (0 of 1; 1 not judged)"
    vega = [q for q in json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))["answers"]["questions"]
            if q["answer"].startswith("Vega")][0]["query_id"]
    assert (f"  not judged:           {vega} (unreadable reply (no JSON object with 'verdict' in the reply: "
            f"'The answer is correct.'))") in lines
    report = (tmp_path / "r.txt").read_text(encoding="utf-8")
    assert "1 answer(s) were not fully judged (see 'Answers'); rerun to judge them (replies are cached)" in report


def test_without_a_judge_only_the_deterministic_checks_count(argv, tmp_path, capsys):
    code, _, err = run(capsys, *argv)
    assert (code, err) == (0, "")
    lines = section(tmp_path / "r.txt")
    assert lines[0].endswith("; no judge (figures and citations only)")
    assert lines[1] == "  correct:              no question judged (2 not judged)"
    assert lines[5] == "  cites a gold page:    1.000 [1.000, 1.000] (1 of 1)"


def test_answers_and_answer_model_contradict(argv, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
    code, out, err = run(capsys, *argv, "--answer-model", "m")
    assert (code, out) == (2, "")
    assert err == ("error: --answers and --answer-model contradict each other: evaluate the answers of your chat "
                   "(--answers FILE) or generate them (--answer-model MODEL), not both\n")


def test_answer_model_answers_from_the_first_k_passages_with_their_headers(argv, tmp_path, capsys, monkeypatch):
    args = [a for a in argv if a not in ("--answers", tmp_path / "answers.jsonl")]
    with OpenAIStub() as stub:
        stub.add_content("Vega measures it [options.pdf, p. 1].")
        stub.add_content("  ")  # an empty answer: unreadable, never an empty string judged
        monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)
        code, _, err = run(capsys, *args, "--answer-model", "stub-model", "--answer-k", "2")
        prompts = [r.prompt() for r in stub.requests]
    assert code == 1
    assert len(prompts) == 2 and all(p.startswith("localRAG answer prompt v1.") for p in prompts)
    assert "Question: How sensitive is the option value to volatility?\n\nPassages:\n[options.pdf, p. 1]\n" in prompts[0]
    assert prompts[0].count("\n[") == 2  # two passages, each under its header
    lines = section(tmp_path / "r.txt")
    assert lines[0] == "Answers: stub-model, first 2 passages, answer prompt v1; no judge (figures and citations only)"
    crops = [q for q in json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))["per_query"]
             if q["question"] == CROPS][0]["query_id"]
    assert (f"  no answer:            {crops} (unreadable reply (the answer model replied with no text))") in lines


def test_a_label_sample_is_drawn_labelled_and_read_back_with_kappa_and_ppi(argv, tmp_path, capsys, monkeypatch):
    from localrag.runs.answering import draw_sample

    with OpenAIStub() as stub:
        for reply in JUDGED:
            stub.add_content(reply)
        monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)
        labels = tmp_path / "labels.csv"
        code, _, err = run(capsys, *argv, "--answer-judge", "stub-model", "--label-sample", "1", "--out", labels)
    assert code == 0
    assert err == (f"Label sample: 1 answer written to {labels}; fill its label column with 1 (correct) or 0, then "
                   f"rerun with --answer-labels {labels}\n")
    ids = [q["query_id"] for q in json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))["answers"]["questions"]]
    [drawn] = draw_sample(ids, 1, 0)  # --seed's default
    rows = labels.read_text(encoding="utf-8").splitlines()
    assert rows[0] == "query_id,question,reference,answer,judge,judge_reason,label" and len(rows) == 2
    assert rows[1].startswith(f"{drawn},") and rows[1].endswith(",")  # the label is the person's to fill
    # Never replaced: the person may have labelled it already. Refused before any retrieval or call (no server).
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{closed_port()}/v1")
    code, _, err = run(capsys, *argv, "--answer-judge", "stub-model", "--label-sample", "1", "--out", labels)
    assert (code, err) == (2, f"error: --label-sample: {labels} exists (it may hold labels already); give another "
                              f"--out FILE or move it away\n")
    labels.write_text(rows[0] + "\n" + rows[1] + "1\n", encoding="utf-8")
    code, _, err = run(capsys, *argv, "--answer-judge", "stub-model", "--answer-labels", labels)
    assert (code, err) == (0, "")
    lines = section(tmp_path / "r.txt")
    assert any(line.startswith("  judge vs people:      kappa undefined, agreement 1.000 over 1 labelled") for line in lines)
    assert any(line.startswith("  correct, PPI++:") and "(1 labelled, 1 more judged; lambda" in line
               for line in lines)
    assert not any("warning" in line for line in lines)
    # Labels of another question than the drawn one: said.
    other = [q for q in ids if q != drawn][0]
    labels.write_text(rows[0] + "\n" + rows[1].replace(drawn, other, 1) + "1\n", encoding="utf-8")
    run(capsys, *argv, "--answer-judge", "stub-model", "--answer-labels", labels)
    assert ("  warning: the labelled questions are not the sample --label-sample 1 draws with seed 0; the PPI++ "
            "interval assumes a uniform random sample") in section(tmp_path / "r.txt")


def test_compare_gives_paired_answer_differences_and_the_questions_that_changed(argv, tmp_path, capsys,
                                                                                monkeypatch):
    for name, first in (("old", JUDGED[0]), ("new", '{"verdict": "incorrect", "reason": "other figure"}')):
        with OpenAIStub() as stub:
            for reply in [first, *JUDGED[1:]]:
                stub.add_content(reply)
            monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)
            cache = tmp_path / f"{name}-cache.json"
            assert run(capsys, *argv, "--answer-judge", "stub-model", "--judge-cache", cache,
                       "--report", tmp_path / f"{name}.txt")[0] == 0
    code, out, err = run(capsys, "--compare", tmp_path / "old.json", tmp_path / "new.json")
    assert (code, err) == (0, "")
    vega = [q["query_id"] for q in json.loads((tmp_path / "new.json").read_text(encoding="utf-8"))["answers"][
        "questions"] if q["answer"].startswith("Vega")][0]
    answers = out[out.index("Answers compared"):].splitlines()
    assert answers[0] == ("Answers compared (paired randomization test over the questions judged in both, 10,000 "
                          "resamples; Holm over 3 metrics)")
    # One of two answers went from correct to not: -0.5, and two questions cannot show it (p = 1, as the sign-flip
    # test of one non-zero difference gives).
    assert answers[1] == ("  correct:              0.500 -> 0.000  -0.500 [-1.000, +1.000]  p 1.000 (Holm 1.000)  "
                          "no detectable difference at this goldset size  (2 questions)")
    assert answers[-1] == f"  changed:              {vega} correct -> not correct"


def test_a_label_sample_that_cannot_be_written_is_a_clear_error_and_the_reports_stay(argv, tmp_path, capsys,
                                                                                   monkeypatch):
    with OpenAIStub() as stub:
        for reply in JUDGED:
            stub.add_content(reply)
        monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)
        (tmp_path / "a_file").write_text("x", encoding="utf-8")
        blocked = tmp_path / "a_file" / "labels.csv"  # its folder is a file
        code, out, err = run(capsys, *argv, "--answer-judge", "stub-model", "--label-sample", "1", "--out", blocked)
    assert (code, out) == (2, "")
    assert err == (f"error: --label-sample: cannot write {blocked} (File exists); nothing was written. The "
                   f"answers and verdicts are cached: rerun with another --out FILE\n")
    assert not (tmp_path / "r.txt").exists()


# ----------------------------------------------------------------------------- a person's labels, checked first

def no_index_opened(monkeypatch) -> None:
    """Make opening an index fail the test: a labels file is checked before any retrieval or model call."""
    from localrag.runs import rows

    def opened(*_args, **_kwargs):
        raise AssertionError("an index was opened before the labels were checked")

    monkeypatch.setattr(rows, "open_pdf_index", opened)


def label_cases(vega: str, crops: str) -> list[tuple[str, str]]:
    """(labels file text, the error after 'error: --answer-labels FILE') of each malformed labels file."""
    return [
        # The file: columns label,query_id and a one-cell row (an AttributeError after the judging).
        ("label,query_id\n1\n",
         ": line 2: 1 cell but the header has 2 columns (label, query_id); give every row a cell for each column "
         "(an empty label leaves the row out)"),
        (f"query_id,label\n{vega},1,extra\n",
         ": line 2: 3 cells but the header has 2 columns (query_id, label); put a cell that contains a comma in "
         "double quotes"),
        (f"query_id,verdict\n{vega},1\n",
         ": line 1: no column 'label' (the header has query_id, verdict); the file needs the columns query_id and "
         "label, as --label-sample writes it"),
        (f"query_id,label\n{vega},maybe\n",
         f": line 2: label 'maybe' of query id {vega} is not 1 or 0; write 1 (correct) or 0 (not correct), or "
         f"leave it empty to leave the answer out"),
        ("query_id,label\n,1\n",
         ": line 2: no query id in column 'query_id'; copy it from the file --label-sample wrote, or delete the line"),
        # Contradictory duplicates are an error, never "last wins"; the same label twice is one label.
        (f"query_id,label\n{vega},1\n{vega},yes\n{crops},0\n{vega},0\n",
         f": query id {vega} is labelled 1 on line 2 and 0 on line 5; keep the right label and delete the other "
         f"line"),
        ("", " is empty; it needs a header with the columns query_id and label (as --label-sample writes it) and "
             "a row per labelled answer"),
    ]


@pytest.mark.parametrize("case", range(7))
def test_a_malformed_labels_file_is_refused_before_any_work(case, argv, tmp_path, capsys, monkeypatch):
    from localrag.goldset.format import query_id

    text, error = label_cases(query_id(VEGA), query_id(CROPS))[case]
    labels = tmp_path / "labels.csv"
    labels.write_text(text, encoding="utf-8")
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{closed_port()}/v1")  # no server is asked
    no_index_opened(monkeypatch)
    code, out, err = run(capsys, *argv, "--answer-judge", "stub-model", "--answer-labels", labels)
    assert (code, out, err) == (2, "", f"error: --answer-labels {labels}{error}\n")
    assert labels.read_text(encoding="utf-8") == text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["answers.jsonl", "gold.csv", "labels.csv"]


def test_labels_of_a_question_the_goldset_lacks_are_refused_before_any_index_is_opened(argv, tmp_path, capsys,
                                                                                       monkeypatch):
    from localrag.goldset.format import query_id

    labels = tmp_path / "labels.csv"
    labels.write_text(f"query_id,label\n{query_id(VEGA)},1\n0123456789,0\n", encoding="utf-8")
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{closed_port()}/v1")
    no_index_opened(monkeypatch)
    code, out, err = run(capsys, *argv, "--answer-judge", "stub-model", "--answer-labels", labels)
    assert (code, out) == (2, "")
    assert err == (f"error: --answer-labels {labels}: line 3: query id 0123456789 is no question of the goldset "
                   f"{tmp_path / 'gold.csv'} (an id is the hash of its question's text); label a sample drawn from "
                   f"this goldset (--label-sample), or delete the line\n")
    assert not (tmp_path / "r.txt").exists()


def test_a_label_sample_written_and_labelled_in_a_spreadsheet_reads_back(argv, tmp_path, capsys, monkeypatch):
    """Answers that start like a formula are written with a leading quote (as --csv and goldsets are); a label
    file with a multi-line answer, an unlabelled row and a duplicate label reads back with the right lines."""
    from localrag.goldset.format import query_id

    formula = "=HYPERLINK(\"http://evil.example\",\"Vega\") measures it [options.pdf, p. 1]."
    answers = [dict(ANSWERS[0], answer=formula), dict(ANSWERS[1], answer="-1 is not an answer; @me\nsecond line")]
    (tmp_path / "answers.jsonl").write_text("".join(json.dumps(a) + "\n" for a in answers), encoding="utf-8")
    with OpenAIStub() as stub:
        for reply in [JUDGED[0], *JUDGED[1:3], '{"verdict": "incorrect", "reason": "no"}']:
            stub.add_content(reply)
        monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)
        sample = tmp_path / "sample.csv"
        code, _, _ = run(capsys, *argv, "--answer-judge", "stub-model", "--label-sample", "2", "--out", sample)
    assert code == 0
    import csv

    table = list(csv.reader(sample.open(encoding="utf-8", newline="")))
    assert [row[3] for row in table[1:]] == ["'" + formula, "'-1 is not an answer; @me\nsecond line"]
    assert [row[4] for row in table[1:]] == ["correct", "incorrect"]
    # A person labels the first row only, and writes it twice.
    vega, crops = query_id(VEGA), query_id(CROPS)
    text = sample.read_text(encoding="utf-8").splitlines(keepends=True)
    assert text[1].startswith(f"{vega},") and text[2].startswith(f"{crops},")
    labelled = text[0] + text[1].rstrip("\n") + "1\n" + "".join(text[2:]) + text[1].rstrip("\n") + "correct\n"
    sample.write_text(labelled, encoding="utf-8")
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{closed_port()}/v1")  # every verdict cached
    code, _, err = run(capsys, *argv, "--answer-judge", "stub-model", "--answer-labels", sample)
    assert (code, err) == (0, "")
    assert sample.read_text(encoding="utf-8") == labelled
    lines = section(tmp_path / "r.txt")
    assert "  labels: line 3: no label; left out" in lines  # the multi-line answer's row starts on line 3
    assert any(line.startswith("  judge vs people:      kappa undefined, agreement 1.000 over 1 labelled")
               for line in lines)


# ----------------------------------------------------------------------------- a stalled server

def test_a_stalled_answer_judge_says_what_it_waits_for_and_the_run_ends_after_one_timeout(argv, tmp_path, capsys,
                                                                                        monkeypatch):
    """The judge's server answers its model list, then never a chat request. The run once printed nothing for
    180 s and gave up after 15.5 min; now it says every 10 s (here 1 s) what it waits for, gives up after one
    timeout (here 2.5 s), names the server, the time and the fix, and writes its report with exit 1."""
    import time

    from localrag import progress
    from localrag.models import llm
    from openai_stub import StalledServer

    monkeypatch.setattr(progress, "LINE_SECONDS", 1.0)
    monkeypatch.setattr(llm, "TIMEOUT_SECONDS", 2.5)
    args = [a for a in argv if a != "--quiet"]  # the waiting lines are progress: --quiet hides them
    with StalledServer() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        started = time.monotonic()
        code, _, err = run(capsys, *args, "--answer-judge", "stub-model")
        waited = time.monotonic() - started
        assert server.chats == 1  # the first prompt stalled; no retry, and no later prompt was sent
    assert code == 1
    assert waited < 60  # it was 5 tries of TIMEOUT_SECONDS and 30 s of backoff
    waiting = [line for line in err.splitlines() if line.startswith("waiting for ")]
    prefix = f"waiting for the answer judge server {server.base_url} (model stub-model): "
    assert waiting[:2] == [f"{prefix}1 s, question 1 of 2", f"{prefix}2 s, question 1 of 2"]
    assert all(line.startswith(prefix) for line in waiting)
    stop = (f"The answer judge server ({server.base_url}) sent no reply for model 'stub-model' in 2.5 s (question 1 "
            f"of 2); it is stalled or overloaded. Check that it answers (restart it; a model too slow for this "
            f"machine needs a smaller one), then rerun; answered questions are cached.")
    assert f"warning: the answer judge stopped: {stop}" in err.splitlines()
    report = (tmp_path / "r.txt").read_text(encoding="utf-8")
    assert f"  degraded: the answer judge stopped: {stop}" in report.splitlines()
    assert "Traceback" not in err
