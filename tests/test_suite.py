"""`eval_retrieval.py --suite FILE`: several evaluations from one TOML file, one report each and a summary table.

Both kinds of entry run in BM25 mode, whose orders can be worked out by hand: BM25 returns only chunks that share
a word with the query, best score first.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import eval_retrieval as er
from localrag.evaluation import report as eval_report
from localrag.runs import suite as eval_suite
from localrag.evaluation.result import EXIT_OK, EvalResult, Status

# Goldset over the tiny corpus (conftest.TINY_CORPUS). BM25 orders (0-based pages):
#   "How do crops react to rainfall?"                   [weather p0, options p0]  -> weather page 1 at rank 1
#   "What is vega?"                                     [options p0]              -> weather.pdf never: miss
#   "How sensitive is the option value to volatility?"  [options p0, weather p0, options p1]
#       expected options page 2 = p1, which is rank 3, but p0 lies within the page tolerance of 1: rank 1 (trap)
# Hit@5 = Hit@10 = 2/3 = 0.667; MRR = (1 + 0 + 1) / 3 = 0.667; Hit@1 = 2/3. NDCG: volatility's neighbour at rank 1
# earns 0.5, its page itself at rank 3 earns 1/log2(4) = 0.5 as well: (1 + 0 + 0.5) / 3 = 0.500.
GOLDSET = (
    "question;expected_source;expected_page\n"
    "How do crops react to rainfall?;weather.pdf;1\n"
    "What is vega?;weather.pdf;1\n"
    "How sensitive is the option value to volatility?;options.pdf;2\n"
)
# BEIR dataset; each document is one chunk with its title as the header. BM25 by query:
#   q1 "Why do turbines have blades?"        turbines: d2, d4; blades: d2  -> [d2, d4]; relevant d2 at rank 1
#   q2 "How do photovoltaic panels work?"    photovoltaic, panels: d1 only  -> [d1]; relevant d1 (2) and d3 (1)
#       NDCG@10 = (2 / log2 2) / (2 / log2 2 + 1 / log2 3) = 2 / 2.6309 = 0.7602; Recall@100 = 1/2
#   q3 "Which storage keeps phones running?" no word in any document ("storage" is not "store") -> [], all 0
# Means: Hit@5 = Hit@10 = 2/3 = 0.667; NDCG@10 = (1 + 0.7602 + 0) / 3 = 0.587; Recall@100 = (1 + 0.5 + 0) / 3
# = 0.500; MRR = (1 + 1 + 0) / 3 = 0.667.
BEIR_DOCS = [
    {"_id": "d1", "title": "Solar panels", "text": "Photovoltaic cells turn sunlight into electric current."},
    {"_id": "d2", "title": "Wind power", "text": "Turbines with three blades harvest moving air."},
    {"_id": "d3", "title": "Batteries", "text": "Lithium cells store chemical energy for later use."},
    {"_id": "d4", "title": "Hydro dams", "text": "Reservoirs release water through turbines to spin generators."},
]
BEIR_QUERIES = [
    {"_id": "q1", "text": "Why do turbines have blades?"},
    {"_id": "q2", "text": "How do photovoltaic panels work?"},
    {"_id": "q3", "text": "Which storage keeps phones running?"},
]
BEIR_QRELS = "query-id\tcorpus-id\tscore\nq1\td2\t1\nq2\td1\t2\nq2\td3\t1\nq3\td3\t1\n"


def run(capsys, *argv) -> tuple[int, str, str]:
    """main() in-process; returns (exit code, stdout, stderr)."""
    code = er.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def beir_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("beir") / "energy"
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in BEIR_DOCS), encoding="utf-8")
    (root / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in BEIR_QUERIES), encoding="utf-8")
    (root / "qrels" / "test.tsv").write_text(BEIR_QRELS, encoding="utf-8")
    return root


@pytest.fixture
def gold_entry(tiny_index, tmp_path):
    """TOML lines of a goldset entry over the session's tiny index (--no-sync: the index is only read)."""
    docs, index = tiny_index
    gold = tmp_path / "gold.csv"
    gold.write_text(GOLDSET, encoding="utf-8")

    def make(name: str = "gold-bm25", goldset: Path = gold) -> str:
        return (f'[[entry]]\nname = "{name}"\ngoldset = "{goldset.as_posix()}"\ndocs = "{docs.as_posix()}"\n'
                f'index = "{index.as_posix()}"\nmode = "bm25"\nno_sync = true\nno_rerank = true\n')

    return make


def write_suite(path: Path, *entries: str) -> Path:
    path.write_text("\n".join(entries), encoding="utf-8")
    return path


def table_rows(text: str) -> dict[str, list[str]]:
    """Summary table rows by entry name: the cells after the name."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:1] == ["entry"])
    rows = {}
    for line in lines[start + 1:]:
        if not line.strip():
            break
        name, *cells = line.split()
        rows[name] = cells
    return rows


def test_two_entries_write_reports_and_summary(gold_entry, beir_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the default SUITE_OUTPUT_DIR is relative to it
    # A dataset entry reads no default path from the working folder: its index goes to the project's cache folder
    # (eval_retrieval.cache_root), here the test's own.
    monkeypatch.setattr(er, "DATASET_CACHE", str(tmp_path / "datasets"))
    dataset = (f'[[entry]]\nname = "beir-bm25"\ndataset = "{beir_dir.as_posix()}"\nmode = "bm25"\n'
               f'no_rerank = true\n')
    suite = write_suite(tmp_path / "suite.toml", gold_entry(), dataset)
    code, out, err = run(capsys, "--suite", suite, "--quiet")
    assert code == 0
    assert "== gold-bm25\n" in err and "== beir-bm25\n" in err
    out_dir = tmp_path / "eval" / "suite_reports"
    assert len(list((tmp_path / "datasets").iterdir())) == 1  # the dataset entry's index
    gold_json = json.loads((out_dir / "gold-bm25.json").read_text(encoding="utf-8"))
    beir_json = json.loads((out_dir / "beir-bm25.json").read_text(encoding="utf-8"))
    assert (out_dir / "gold-bm25.txt").read_text(encoding="utf-8").startswith("localRAG retrieval evaluation")
    assert (out_dir / "beir-bm25.txt").is_file()
    # Hand values (see the top of the file).
    assert gold_json["metrics"] == pytest.approx({"hit@1": 2 / 3, "hit@5": 2 / 3, "hit@10": 2 / 3, "hit@20": 2 / 3,
                                                  "ndcg@5": 0.5, "ndcg@10": 0.5, "ndcg@20": 0.5, "mrr": 2 / 3})
    assert [q["rank"] for q in gold_json["per_query"]] == [1, None, 1]
    assert beir_json["metrics"]["ndcg@10"] == pytest.approx((1 + 2 / (2 + 1 / 1.584962500721156)) / 3)
    assert {k: beir_json["metrics"][k] for k in ("hit@5", "hit@10", "recall@100", "mrr")} == \
        pytest.approx({"hit@5": 2 / 3, "hit@10": 2 / 3, "recall@100": 0.5, "mrr": 2 / 3})

    summary = (out_dir / "summary.txt").read_text(encoding="utf-8")
    # The summary is also what the run prints, then the last line: every file written, each entry's, the summary's.
    written = [f"eval/suite_reports/{name}" for name in ("gold-bm25.txt", "gold-bm25.json", "gold-bm25.details.md",
                                                         "beir-bm25.txt", "beir-bm25.json", "summary.txt",
                                                         "summary.md")]
    assert out == summary + "Wrote " + ", ".join(written) + "\n"
    assert summary.splitlines()[0] == f"localRAG suite: {suite.as_posix()}"
    lines = summary.splitlines()
    assert lines[2].split() == ["entry", "Hit@5", "Hit@10", "NDCG@10", "Recall@100", "MRR", "queries", "report"]
    rows = table_rows(summary)
    # Columns of metrics an entry lacks (a goldset has no NDCG or Recall) show a dash; equal bests both get *.
    assert rows == {
        "gold-bm25": ["0.667*", "0.667*", "0.500", "–", "0.667*", "3", "eval/suite_reports/gold-bm25.txt"],
        "beir-bm25": ["0.667*", "0.667*", "0.587*", "0.500*", "0.667*", "3", "eval/suite_reports/beir-bm25.txt"],
    }
    # Every cell is the entry's own JSON metric, formatted as the reports format it.
    keys = ["hit@5", "hit@10", "ndcg@10", "recall@100", "mrr"]
    for name, data in (("gold-bm25", gold_json), ("beir-bm25", beir_json)):
        assert [cell.rstrip("*") for cell in rows[name][:5]] == [eval_report.fmt(data["metrics"].get(k)) for k in keys]
    markdown = (out_dir / "summary.md").read_text(encoding="utf-8").splitlines()
    assert markdown[0] == "| entry | Hit@5 | Hit@10 | NDCG@10 | Recall@100 | MRR | queries |"
    assert markdown[2] == "| gold-bm25 | 0.667 **best** | 0.667 **best** | 0.500 | – | 0.667 **best** | 3 |"


def test_output_name_names_reports_and_summary(gold_entry, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # were the patch ignored, eval/suite_reports would land here, not in the repo
    out_dir = tmp_path / "reports"
    monkeypatch.setattr(er, "SUITE_OUTPUT_DIR", str(out_dir))
    # The second entry has its own report path: the output name goes before its extension, too.
    custom = tmp_path / "custom" / "kept.txt"
    suite = write_suite(tmp_path / "suite.toml", gold_entry(),
                        gold_entry("gold-custom") + f'report = "{custom.as_posix()}"\n')
    for output_name in ("before", "after"):
        code, out, _ = run(capsys, "--suite", suite, "--output-name", output_name, "--quiet")
        assert code == 0
        assert out.splitlines()[0] == f"localRAG suite: {suite.as_posix()} ({output_name})"
    assert sorted(p.name for p in out_dir.iterdir()) == [
        "gold-bm25-after.details.md", "gold-bm25-after.json", "gold-bm25-after.txt",
        "gold-bm25-before.details.md", "gold-bm25-before.json", "gold-bm25-before.txt",
        "summary-after.md", "summary-after.txt", "summary-before.md", "summary-before.txt"]
    assert sorted(p.name for p in custom.parent.iterdir()) == [
        "kept-after.details.md", "kept-after.json", "kept-after.txt",
        "kept-before.details.md", "kept-before.json", "kept-before.txt"]
    before = json.loads((out_dir / "gold-bm25-before.json").read_text(encoding="utf-8"))
    after = json.loads((out_dir / "gold-bm25-after.json").read_text(encoding="utf-8"))
    assert before["metrics"] == after["metrics"]
    rows = table_rows((out_dir / "summary-after.txt").read_text(encoding="utf-8"))
    assert rows["gold-custom"][-1] == (custom.parent / "kept-after.txt").as_posix()


def test_failing_entries_are_listed_and_the_others_reported(gold_entry, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # were the patch ignored, eval/suite_reports would land here, not in the repo
    monkeypatch.setattr(er, "SUITE_OUTPUT_DIR", str(tmp_path / "reports"))
    missing = tmp_path / "nowhere.csv"
    typo = gold_entry("typo").replace('mode = "bm25"', 'modee = "bm25"')  # an option eval_retrieval does not know
    suite = write_suite(tmp_path / "suite.toml", gold_entry("no-goldset", missing), gold_entry(), typo)
    code, out, err = run(capsys, "--suite", suite, "--quiet")
    assert code == 1
    assert f"error: goldset not found: {missing}." in err
    assert "error: unrecognized arguments: --modee bm25" in err
    lines = out.splitlines()
    assert list(table_rows(out)) == ["gold-bm25"]
    # Hit@5, Hit@10, NDCG@10, MRR; one row: no *
    assert table_rows(out)["gold-bm25"][:4] == ["0.667", "0.667", "0.500", "0.667"]
    assert lines[-2:] == ["Failed entries (see the messages above): no-goldset, typo",
                          "Wrote reports/gold-bm25.txt, reports/gold-bm25.json, reports/gold-bm25.details.md, "
                          "reports/summary.txt, reports/summary.md"]
    assert (tmp_path / "reports" / "summary.txt").read_text(encoding="utf-8") + lines[-1] + "\n" == out
    assert not (tmp_path / "reports" / "no-goldset.json").exists()


def test_an_entry_failing_its_gate_is_reported_and_listed(gold_entry, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(er, "SUITE_OUTPUT_DIR", str(tmp_path / "reports"))
    gated = gold_entry("gated") + 'fail_under = "hit@5=0.9"\n'  # Hit@5 is 0.667: exit 1, report written
    suite = write_suite(tmp_path / "suite.toml", gold_entry(), gated)
    code, out, _ = run(capsys, "--suite", suite, "--quiet")
    assert code == 1
    assert list(table_rows(out)) == ["gold-bm25", "gated"]
    assert out.splitlines()[-2:] == [
        "Entries with a failed gate or a degraded run (see the status in their reports): gated",
        "Wrote reports/gold-bm25.txt, reports/gold-bm25.json, reports/gold-bm25.details.md, reports/gated.txt, "
        "reports/gated.json, reports/gated.details.md, reports/summary.txt, reports/summary.md"]
    assert (tmp_path / "reports" / "gated.txt").read_text(encoding="utf-8").splitlines()[1:3] == [
        "Status: exit 1, evaluated but a gate failed", "  gate failed: Hit@5 0.6667 is under --fail-under hit@5=0.9"]


def test_all_entries_failing_still_writes_a_summary(gold_entry, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # were the patch ignored, eval/suite_reports would land here, not in the repo
    monkeypatch.setattr(er, "SUITE_OUTPUT_DIR", str(tmp_path / "reports"))
    suite = write_suite(tmp_path / "suite.toml", gold_entry("only", tmp_path / "nowhere.csv"))
    code, out, _ = run(capsys, "--suite", suite, "--quiet")
    assert code == 1
    assert out.splitlines() == [f"localRAG suite: {suite.as_posix()}", "", "  no entry finished", "",
                                "Failed entries (see the messages above): only",
                                "Wrote reports/summary.txt, reports/summary.md"]


def test_entries_are_results_of_the_function_handed_in(tmp_path, capsys):
    # The suite calls the function with each entry's options (TOML-typed, suite keys left out) and report path;
    # the summary comes from the results it returns, never from a report on disk: a stale report at an entry's
    # path does not pass for a result, and an entry without a result fails.
    out_dir = tmp_path / "reports"
    out_dir.mkdir()
    (out_dir / "quiet-new.json").write_text('{"metrics": {"mrr": 1.0}, "num_queries": 1}', encoding="utf-8")
    custom = tmp_path / "custom" / "typed.txt"
    suite = write_suite(tmp_path / "suite.toml", '[[entry]]\nname = "quiet"\ngoldset = "g.csv"\n',
                        f'[[entry]]\nname = "typed"\ngoldset = "g.csv"\nk = [1, 3]\nno_rerank = true\n'
                        f'max_queries = 7\nreport = "{custom.as_posix()}"\njson = "ignored.json"\n')
    calls = []

    def evaluate(options, report):
        calls.append((options, report))
        if report.stem.startswith("quiet"):
            return None
        return EvalResult("goldset", "goldset g.csv", {"hit@1": 0.25, "mrr": 0.5}, 4, (), status=Status(EXIT_OK))

    code = eval_suite.run_suite(suite, "new", evaluate, output_dir=out_dir)
    out, _ = capsys.readouterr()
    assert code == 1
    assert calls == [({"goldset": "g.csv"}, out_dir / "quiet-new.txt"),
                     ({"goldset": "g.csv", "k": [1, 3], "no_rerank": True, "max_queries": 7},
                      custom.with_name("typed-new.txt"))]
    assert table_rows(out) == {"typed": ["0.500", "4", custom.with_name("typed-new.txt").as_posix()]}
    assert out.splitlines()[-1] == "Failed entries (see the messages above): quiet"


def test_entry_options_are_read_as_command_line_flags():
    # True is a bare flag, False leaves it out, a list is comma-joined, anything else is its text.
    assert er.option_flags({"mode": "dense", "no_rerank": True, "rebuild": False, "k": [1, 3],
                            "max_queries": 7, "fail_under": "hit@5=0.9"}) == [
        "--mode", "dense", "--no-rerank", "--k", "1,3", "--max-queries", "7", "--fail-under", "hit@5=0.9"]


BAD_SUITES = [
    # (file text or None for a missing file, message after "suite.toml" has been replaced by {path})
    (None, "suite file {path} does not exist; see eval/suite.toml for an example"),
    ('[[entry]\nname = "a"\n', "suite file {path} is not valid TOML: Expected ']]' at the end of an array "
                               "declaration (at line 1, column 8)"),
    ('title = "no entries"\n', "suite file {path} has no [[entry]] tables; each entry needs name and goldset or "
                               "dataset"),
    ("entry = [1]\n", "entry 1 in {path} is not a table but 1; write each entry as [[entry]] followed by "
                      "key = value lines"),
    ('[[entry]]\nname = "a"\ngoldset = "g.csv"\n[[entry]]\ngoldset = "g.csv"\n',
     "entry 2 in {path} needs a name (text without '/'), got None"),
    ('[[entry]]\nname = "a/b"\ngoldset = "g.csv"\n', "entry 1 in {path} needs a name (text without '/'), got 'a/b'"),
    ('[[entry]]\nname = "a"\ngoldset = "g.csv"\n[[entry]]\nname = "a"\ndataset = "d"\n',
     "entry name 'a' appears twice in {path}; names must be unique"),
    ('[[entry]]\nname = "a"\ngoldset = "g.csv"\ndataset = "d"\n',
     "entry 'a' in {path} needs exactly one of goldset = ... or dataset = ..."),
    ('[[entry]]\nname = "a"\n', "entry 'a' in {path} needs exactly one of goldset = ... or dataset = ..."),
    ('[[entry]]\nname = "a"\ngoldset = "g.csv"\nablation = true\nsuite = "x.toml"\n',
     "entry 'a' in {path} uses ablation, suite, which only works on the command line"),
]


@pytest.mark.parametrize(("text", "message"), BAD_SUITES)
def test_bad_suite_files_exit_2(text, message, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # were the patch ignored, eval/suite_reports would land here, not in the repo
    monkeypatch.setattr(er, "SUITE_OUTPUT_DIR", str(tmp_path / "reports"))
    path = tmp_path / "suite.toml"
    if text is not None:
        path.write_text(text, encoding="utf-8")
    code, out, err = run(capsys, "--suite", path, "--quiet")
    assert (code, out, err) == (2, "", f"error: {message.format(path=path)}\n")
    assert not (tmp_path / "reports").exists()  # nothing ran


def test_a_folder_where_the_summary_goes_is_refused_before_any_entry_runs(tmp_path, capsys, monkeypatch):
    """The summary was written after every entry had run, and a folder in its place ended in a traceback."""
    monkeypatch.setattr(er, "SUITE_OUTPUT_DIR", str(tmp_path / "reports"))
    (tmp_path / "reports" / "summary-new.md").mkdir(parents=True)
    suite = write_suite(tmp_path / "suite.toml", '[[entry]]\nname = "a"\ngoldset = "g.csv"\n')
    code, out, err = run(capsys, "--suite", suite, "--output-name", "new", "--quiet")
    summary = tmp_path / "reports" / "summary-new.md"
    assert (code, out, err) == (2, "", f"error: the suite's summary {summary} is a folder, not a file; move that "
                                       f"folder, or give another --output-name\n")


def test_a_summary_that_cannot_be_written_is_one_message_naming_it(tmp_path, monkeypatch):
    from localrag import files

    suite = write_suite(tmp_path / "suite.toml", '[[entry]]\nname = "a"\ngoldset = "g.csv"\n')

    def full(**kwargs):
        raise OSError(28, "No space left on device", str(tmp_path / "reports" / ".summary.txt.abc.tmp"))

    monkeypatch.setattr(files.tempfile, "mkstemp", full)
    with pytest.raises(eval_suite.SuiteError) as caught:
        eval_suite.run_suite(suite, None, lambda options, report: EvalResult("goldset", "goldset g.csv", {"mrr": 0.5},
                                                                             1, (), status=Status(EXIT_OK)),
                             output_dir=tmp_path / "reports")
    assert str(caught.value) == (f"the suite's summary could not be written: {tmp_path / 'reports' / 'summary.txt'}: "
                                 f"No space left on device; the entries' reports are written. Free some space on its "
                                 f"disk, then run again")
