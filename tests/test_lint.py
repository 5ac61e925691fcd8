"""Tests for localrag/goldset/lint.py: findings and their messages, near-duplicates, page offset, rendering."""

from __future__ import annotations

import sys
from dataclasses import dataclass

import pytest

from localrag.goldset.lint import (AMBIGUOUS, DUPLICATES, DocInfo, IndexedFiles, LintFinding, lint_goldset,
                                   near_duplicate_groups, near_duplicate_pairs, near_duplicate_pairs_brute_force,
                                   render_lint, where_text)


@dataclass(frozen=True)
class Loc:
    source: str
    page: int | None


@dataclass(frozen=True)
class Q:
    question: str
    locations: tuple[Loc, ...]
    lines: tuple[int, ...]


INDEX = {"Hull Options.pdf": DocInfo(pages=10, empty_pages=frozenset({4})), "Bericht_2023.pdf": DocInfo(pages=3)}


def test_lint_reports_every_finding_with_its_message():
    questions = [
        Q("What does vega measure?", (Loc("Hull Options.pdf", 3),), (2,)),            # fine
        Q("What is gamma hedging?", (Loc("Hul Options.pdf", 2),), (3,)),              # misspelt file
        Q("Was zeigt Tabelle 4?", (Loc("hull options.PDF", 12),), (4,)),              # case is fine; 12 > 10 pages
        Q("What does Figure 2 show?", (Loc("Hull Options.pdf", 5),), (5,)),           # page 5 = 0-based 4: no text
        Q("Vega?", (Loc("Hull Options.pdf", 1),), (6,)),
        Q("  ", (Loc("Hull Options.pdf", 1),), (7,)),
        Q("What does vega measure exactly?", (Loc("Bericht_2023.pdf", 1),), (8,)),   # Jaccard 4/5 with line 2
        Q("Which report covers the year?", (Loc("Zzz.pdf", None),), (9,)),
        Q("What is on the cover page?", (Loc("Bericht_2023.pdf", 0),), (10, 12)),     # two rows
    ]
    messages = ["line 11: no question in column 'frage'; row skipped", "header has an extra column",
                "line 13: repeats a location of line 12; ignored"]
    findings = lint_goldset(questions, messages, INDEX)
    # Sorted by first line (findings without a line first), errors before warnings on the same line.
    # Reader messages: "skipped" -> error (the row is not evaluated), anything else -> warning.
    assert findings == [
        LintFinding("warning", "reader: header has an extra column", ()),
        LintFinding("warning", "near-identical questions on lines 2 and 8 expect different files ('Hull Options.pdf' "
                    "vs 'Bericht_2023.pdf'); give them the same text and both locations, or make them distinct",
                    (2, 8)),
        LintFinding("error", "expected file 'Hul Options.pdf' is not in the index; did you mean 'Hull Options.pdf'?",
                    (3,)),
        LintFinding("error", "page 12 of 'hull options.PDF' is beyond its 10 pages; pages in the goldset count from 1",
                    (4,)),
        LintFinding("error", "page 5 of 'Hull Options.pdf' has no text (scanned page?); no retriever can find it: "
                    "OCR the PDF or point to a page with text", (5,)),
        LintFinding("warning", "question 'Vega?' has 1 word; write a full question of at least 3 words", (6,)),
        LintFinding("error", "question is empty", (7,)),
        LintFinding("error", "expected file 'Zzz.pdf' is not in the index; no similar name among the 2 indexed "
                    "files; index the file or fix the name", (9,)),
        LintFinding("error", "page 0 of 'Bericht_2023.pdf' is before the first page; pages in the goldset count "
                    "from 1", (10, 12)),
        LintFinding("error", "reader: line 11: no question in column 'frage'; row skipped", (11,)),
        LintFinding("warning", "reader: line 13: repeats a location of line 12; ignored", (13,)),
    ]


def test_lint_near_duplicates_in_one_file():
    questions = [
        Q("What is gamma hedging?", (Loc("Hull Options.pdf", 3),), (2,)),
        Q("What is gamma hedging ?", (Loc("Hull Options.pdf", 6),), (3,)),   # same tokens, other page
        Q("what is GAMMA hedging", (Loc("hull options.pdf", 3),), (4,)),     # same tokens, same place
        Q("What is delta hedging?", (Loc("Bericht_2023.pdf", 1),), (5,)),    # 3/5 with the others: no duplicate
    ]
    findings = lint_goldset(questions, [], INDEX)
    # One group, one finding (issue 52: it was one per pair, three here).
    assert [(f.lines, f.message, f.kind) for f in findings] == [
        ((2, 3, 4), "3 near-identical questions expect different pages; merge them or make them distinct (each "
                    "counts in the averages)", DUPLICATES),
    ]
    assert [(f.lines, f.message) for f in lint_goldset(questions[1:], [], INDEX)] == [
        ((3, 4), "near-identical questions on lines 3 and 4 expect different pages; merge them or make them distinct "
                 "(each counts in the averages)")]
    assert [f.message for f in lint_goldset([questions[0], questions[2]], [], INDEX)] == [
        "near-identical questions on lines 2 and 4 expect the same places; merge them or make them distinct "
        "(each counts in the averages)"]


def test_lint_page_offset_zero_and_the_names_matching_uses():
    # Names compare as matching compares them (".pdf", case, a trailing "_" dropped). Page 10 is the last of ten
    # when pages count from 1, beyond them when they count from 0.
    questions = [Q("What does vega measure?", (Loc("hull options_", 10),), (2,))]
    assert lint_goldset(questions, [], INDEX) == []
    assert lint_goldset(questions, [], INDEX, page_offset=0) == [LintFinding(
        "error", "page 10 of 'hull options_' is beyond its 10 pages; pages in the goldset count from 0", (2,))]


def test_files_of_one_name_in_two_folders():
    # Issue 52: docs/sub1/Same.pdf (20 pages) and docs/sub2/Same.pdf (10 pages), as the index records them.
    docs = {"sub1/Same.pdf": DocInfo(pages=20), "sub2/Same.pdf": DocInfo(pages=10), "Other.pdf": DocInfo(pages=2)}
    files = IndexedFiles(docs)
    assert [files.diagnose(loc) for loc in (Loc("sub1/Same.pdf", 15), Loc("SUB2\\same", 3), Loc("other.pdf", 1))] \
        == [None, None, None]
    assert files.diagnose(Loc("sub2/Same.pdf", 15)) == ("page 15 of 'sub2/Same.pdf' is beyond its 10 pages; pages "
                                                        "in the goldset count from 1")
    ambiguous = ("expected file 'Same.pdf' is ambiguous: 2 files have that name ('sub1/Same.pdf', 'sub2/Same.pdf'), "
                 "and a page of either would be credited; write sub1/Same.pdf or sub2/Same.pdf in the goldset")
    assert files.diagnose(Loc("Same.pdf", 15)) == ambiguous
    assert files.diagnose(Loc("sub3/Same.pdf", 1)) == ("expected file 'sub3/Same.pdf' is not in the index; did you "
                                                       "mean 'sub1/Same.pdf', 'sub2/Same.pdf'?")
    assert (files.name_of("sub1/Same.pdf"), files.name_of("Same.pdf"), files.name_of("Other")) == \
        ("sub1/Same.pdf", None, "Other.pdf")
    findings = lint_goldset([Q("Where is the option set?", (Loc("Same.pdf", 3),), (2,))], [], docs)
    assert [(f.severity, f.message, f.lines, f.kind) for f in findings] == [("error", ambiguous, (2,), AMBIGUOUS)]
    # A file of that name that failed to index makes the bare name ambiguous too.
    files = IndexedFiles({"sub1/Same.pdf": DocInfo(pages=20)}, unindexed={"sub2/Same.pdf": "not a readable PDF"})
    assert files.diagnose(Loc("Same.pdf", 3)).startswith("expected file 'Same.pdf' is ambiguous: 2 files")
    assert files.diagnose(Loc("sub2/Same.pdf", 3)) == ("expected file 'sub2/Same.pdf' is in the docs folder but "
                                                       "could not be indexed: not a readable PDF")


def test_one_diagnosis_per_location():
    files = IndexedFiles(INDEX, unindexed={"Scan.PDF": "no text layer on any page (scanned? run OCR first)"})
    assert files.name_of("HULL OPTIONS") == "Hull Options.pdf" and files.name_of("Greeks.pdf") is None
    assert [files.diagnose(loc) for loc in (Loc("hull options.pdf", 3), Loc("Bericht_2023", None),
                                             Loc("scan.pdf", 1), Loc("Hul Options.pdf", 1))] == [
        None,
        None,
        "expected file 'scan.pdf' is in the docs folder but could not be indexed: no text layer on any page "
        "(scanned? run OCR first)",
        "expected file 'Hul Options.pdf' is not in the index; did you mean 'Hull Options.pdf'?",
    ]


def test_a_problem_shared_by_two_locations_of_one_question_is_said_once():
    questions = [Q("Which pages define delta and gamma?", (Loc("Gone.pdf", 2), Loc("Gone.pdf", 5),
                                                           Loc("Hull Options.pdf", 11)), (3, 4, 5))]
    assert lint_goldset(questions, [], INDEX) == [
        LintFinding("error", "expected file 'Gone.pdf' is not in the index; no similar name among the 2 indexed "
                    "files; index the file or fix the name", (3, 4, 5)),
        LintFinding("error", "page 11 of 'Hull Options.pdf' is beyond its 10 pages; pages in the goldset count from 1",
                    (3, 4, 5))]


def test_an_empty_index_is_one_finding_not_one_per_location():
    questions = [Q("What does vega measure?", (Loc("b.pdf", 3), Loc("b.pdf", 4)), (2, 3)),
                 Q("What is gamma hedging?", (Loc("a.pdf", 2),), (4,)),
                 Q("Vega?", (Loc("c.pdf", 1),), (5,)),
                 Q("What is theta decay?", (Loc("d.pdf", 1),), (6,))]
    assert lint_goldset(questions, [], {}) == [
        LintFinding("error", "the index holds no files, so none of the 4 expected files (a.pdf, b.pdf, c.pdf, ...) "
                    "can be found; index the docs folder with add_pdfs.py", ()),
        LintFinding("warning", "question 'Vega?' has 1 word; write a full question of at least 3 words", (5,))]
    # A file the docs folder holds but that failed to index is still named with its reason.
    assert lint_goldset(questions[2:3], [], {}, unindexed={"c.pdf": "not a readable PDF"})[0].severity == "error"


def test_where_text():
    assert [where_text(lines) for lines in ((), (4,), (2, 8))] == ["goldset", "line 4", "lines 2, 8"]
    assert where_text(tuple(range(1, 11))) == "lines 1, 2, 3, 4, 5, 6, 7, 8, 9, 10"
    assert where_text(tuple(range(1, 2002))) == "lines 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 and 1,991 more"


def test_render_lint():
    findings = [
        LintFinding("error", "question is empty", (7,)),
        LintFinding("warning", "near-identical questions", (2, 8)),
        LintFinding("error", "reader: header has an extra column", ()),
    ]
    assert render_lint(findings) == [
        "error   line 7: question is empty",
        "warning lines 2, 8: near-identical questions",
        "error   goldset: reader: header has an extra column",
        "2 errors, 1 warning",
    ]
    assert render_lint([]) == ["goldset OK: no problems found"]


@dataclass(frozen=True)
class RangeLoc:
    source: str
    page: int | None
    last_page: int | None = None
    problem: str = ""


def test_lint_page_ranges_and_left_out_reader_messages():
    questions = [
        Q("What does vega measure?", (RangeLoc("Hull Options.pdf", 9, 10),), (2,)),       # last two pages: fine
        Q("What does gamma measure?", (RangeLoc("Hull Options.pdf", 10, 11),), (3,)),     # runs past page 10
        Q("What does theta measure?", (RangeLoc("Hull Options.pdf", 5),), (4,)),          # the empty page
        Q("What does rho measure here?", (RangeLoc("Hull Options.pdf", 4, 5),), (5,)),    # page 4 has text
        Q("What does vanna measure?", (RangeLoc("Hull Options.pdf", None, problem="bad"),), (6,)),  # reader's
    ]
    reader = ["line 6: page 'x' in column 'erwartete_seite' is not a page; write 12, 12-13, S. 12, Seite 12 or "
              "p. 12; the question is left out of the metrics until the page is fixed"]
    findings = lint_goldset(questions, reader, INDEX)
    assert [(f.severity, f.lines, f.message) for f in findings] == [
        ("error", (3,), "page 10-11 of 'Hull Options.pdf' is beyond its 10 pages; pages in the goldset count from 1"),
        ("error", (4,), "page 5 of 'Hull Options.pdf' has no text (scanned page?); no retriever can find it: OCR "
                        "the PDF or point to a page with text"),
        ("error", (6,), f"reader: {reader[0]}"),
    ]


def random_questions(rng, n):
    """Questions from a small vocabulary, a third of them edited copies of earlier ones, some without words."""
    words = ("what is the vega delta gamma option price call put black scholes volatility how does a stock "
             "index risk free rate equation state page report kafka samsa").split()
    texts = []
    for _ in range(n):
        if texts and rng.random() < 0.35:
            copy = rng.choice(texts).split()
            if copy and rng.random() < 0.5:
                copy[rng.randrange(len(copy))] = rng.choice(words)
            texts.append(" ".join(copy + ([rng.choice(words)] if rng.random() < 0.3 else [])))
        else:
            texts.append(" ".join(rng.choice(words) for _ in range(rng.randint(0, 9))) + rng.choice(["?", "", " ?"]))
    return texts


def test_near_duplicate_pairs_equal_the_brute_force():
    import random

    rng = random.Random(13)
    found = 0
    for n in (300, 400, 500):
        texts = random_questions(rng, n)
        pairs = near_duplicate_pairs(texts)
        assert pairs == near_duplicate_pairs_brute_force(texts)
        found += len(pairs)
    assert found > 1000  # the random goldsets do hold many near-duplicates, token-less ones included


@pytest.mark.parametrize("threshold", [0.3, 0.5, 0.6, 0.8, 1.0])
def test_near_duplicate_pairs_are_exact_at_any_threshold(threshold):
    # Small sets from 10 words: at 0.5 and below, pairs sharing a single token reach the threshold too.
    import random

    rng = random.Random(int(threshold * 10))
    words = "a b c d e f g h i j".split()
    for _ in range(20):
        texts = [" ".join(rng.sample(words, rng.randint(0, 5))) + "?" for _ in range(100)]
        assert near_duplicate_pairs(texts, threshold) == near_duplicate_pairs_brute_force(texts, threshold)


def test_lint_findings_equal_those_of_comparing_every_pair(monkeypatch):
    import random

    from localrag.goldset import lint as goldset_lint

    rng = random.Random(7)
    questions = [Q(text, (Loc(rng.choice(sorted(INDEX)), rng.randint(1, 3)),), (line,))
                 for line, text in enumerate(random_questions(rng, 300), start=2)]
    fast = lint_goldset(questions, [], INDEX)
    monkeypatch.setattr(goldset_lint, "near_duplicate_groups",
                        lambda texts, **_: components(len(texts), near_duplicate_pairs_brute_force(texts)))
    assert lint_goldset(questions, [], INDEX) == fast
    assert sum(f.kind == DUPLICATES for f in fast) > 10


def components(n, pairs):
    """The connected sets of two or more of range(n) that `pairs` link, each sorted, in order of their first."""
    linked = {i: {i} for i in range(n)}
    for i, j in pairs:
        if linked[i] is not linked[j]:
            merged = linked[i] | linked[j]
            for k in merged:
                linked[k] = merged
    return sorted({tuple(sorted(group)) for group in linked.values() if len(group) > 1})


def test_near_duplicate_groups_are_the_components_of_the_pairs():
    import random

    rng = random.Random(52)
    for n, threshold in ((300, 0.8), (400, 0.8), (300, 0.5), (200, 1.0)):
        texts = random_questions(rng, n) + ["", "???", "  ", "!!"]  # token-less ones, blank ones among them
        groups = near_duplicate_groups(texts, threshold)
        assert [tuple(group) for group in groups] == components(len(texts), near_duplicate_pairs_brute_force(
            texts, threshold))
        assert any(len(group) > 2 for group in groups)
    # The token-less texts: "???" pairs with every later one (Jaccard 1.0), the blank one before it with none.
    assert near_duplicate_groups(["  ", "???", "", "!!"]) == [[1, 2, 3]]


def template_questions(items):
    """A template asked of each item: every two differ in one word of ten (Jaccard 9/11 >= 0.8)."""
    return [Q(f"What does the manual say about option {item} in the settings dialog?",
              (Loc("Hull Options.pdf", 1 + n % 3),), (n + 2,)) for n, item in enumerate(items)]


def test_a_group_of_near_identical_questions_is_one_finding_with_its_count():
    # Issue 52: 20,000 such questions gave 2,334,017 pair warnings (385 MB of --lint output).
    words = [f"w{n}" for n in range(234)]
    findings = lint_goldset(template_questions(words), [], INDEX)
    assert [(f.severity, f.kind, len(f.lines)) for f in findings] == [("warning", DUPLICATES, 234)]
    assert findings[0].message == ("234 near-identical questions expect different pages; merge them or make them "
                                   "distinct (each counts in the averages)")
    assert render_lint(findings) == [
        "warning lines 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 and 224 more: " + findings[0].message, "0 errors, 1 warning"]
    # Two groups of one size say the same and are still two findings, each on its own lines.
    two = template_questions(words[:3]) + [Q(f"Which table of the annual report lists the revenue of region {n}?",
                                              (Loc("Bericht_2023.pdf", 1 + n % 2),), (n,)) for n in (50, 51, 52)]
    message = "3 near-identical questions expect different pages; merge them or make them distinct (each counts in " \
              "the averages)"
    assert [(f.lines, f.message) for f in lint_goldset(two, [], INDEX)] == [((2, 3, 4), message),
                                                                          ((50, 51, 52), message)]
    other = Q("What does the manual say about option w0 in the settings window?", (Loc("Bericht_2023.pdf", 1),),
              (300,))
    mixed = lint_goldset(template_questions(words[:3]) + [other], [], INDEX)
    assert [f.lines for f in mixed] == [(2, 3, 4, 300)]
    assert [f.message for f in mixed] == [
        "4 near-identical questions expect different files ('Hull Options.pdf' and 'Bericht_2023.pdf'); give them "
        "the same text and every location, or make them distinct"]


def test_a_group_names_its_first_files_and_counts_the_rest():
    questions = [Q(f"What does the manual say about option {n} in the settings dialog?", (Loc(f"m{n}.pdf", 1),),
                   (n + 2,)) for n in range(7)]
    docs = {f"m{n}.pdf": DocInfo(pages=1) for n in range(7)}
    assert [f.message for f in lint_goldset(questions, [], docs)] == [
        "7 near-identical questions expect different files ('m0.pdf', 'm1.pdf', 'm2.pdf', 'm3.pdf', 'm4.pdf' and 2 "
        "more); give them the same text and every location, or make them distinct"]


def test_a_problem_of_many_questions_is_one_finding_on_their_lines():
    questions = [Q(f"Which page of the report covers region {n}?", (Loc("Gone.pdf", 2),), (n,)) for n in (2, 5, 9)]
    assert lint_goldset(questions, [], INDEX) == [
        LintFinding("error", "expected file 'Gone.pdf' is not in the index; no similar name among the 2 indexed "
                    "files; index the file or fix the name", (2, 5, 9))]


def test_past_twenty_findings_of_a_kind_one_line_counts_the_rest():
    questions = [Q(f"Vega {n}?", (Loc("Hull Options.pdf", 1),), (n,)) for n in range(2, 27)]  # 25 short ones
    questions.append(Q("", (Loc("Zzz.pdf", 1),), (30,)))
    findings = lint_goldset(questions, [], INDEX)
    assert len(findings) == 27
    lines = render_lint(findings)
    assert lines[:20] == [f"warning line {n}: question 'Vega {n}?' has 2 words; write a full question of at least 3 "
                          f"words" for n in range(2, 22)]
    assert lines[20:] == [
        "error   line 30: expected file 'Zzz.pdf' is not in the index; no similar name among the 2 indexed files; "
        "index the file or fix the name",
        "error   line 30: question is empty",
        "warning lines 22, 23, 24, 25, 26: 5 more short or empty questions like the 20 above, not shown",
        "2 errors, 25 warnings",
    ]
    assert render_lint(findings, per_kind=30)[:-1] == [f"{f.severity:<7} {where_text(f.lines)}: {f.message}"
                                                      for f in findings]


def test_large_goldset_shows_a_progress_bar(capsys, monkeypatch):
    from localrag.goldset import lint as goldset_lint

    monkeypatch.setattr(goldset_lint, "PROGRESS_MIN_QUESTIONS", 3)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)  # a terminal: the bars (elsewhere, timed lines)
    questions = [Q(f"What does page {n} of the report say?", (Loc("Bericht_2023.pdf", 1),), (n,)) for n in range(5)]
    lint_goldset(questions, [], INDEX, progress=True)
    err = capsys.readouterr().err
    assert "Lint: questions" in err and "Lint: near-duplicates" in err
    lint_goldset(questions, [], INDEX)
    assert capsys.readouterr().err == ""


@dataclass(frozen=True)
class Answered(Q):
    reference: str = ""


def test_questions_without_a_reference_answer_are_named_when_others_have_one():
    questions = [Answered("What was FY2018 capex for 3M?", (Loc("Hull Options.pdf", 3),), (2,), "$1577.00"),
                 Answered("What does vega measure here?", (Loc("Hull Options.pdf", 3),), (3, 5), ""),
                 Answered("Which report covers the year?", (Loc("Bericht_2023.pdf", 1),), (4,), "  ")]
    assert lint_goldset(questions, [], INDEX) == [LintFinding(
        "warning", "2 of 3 questions have no reference answer (column antwort / answer): answer correctness "
                   "cannot be judged for them; add one, or evaluate answers on the others only", (3, 4, 5))]
    # All or none with an answer: nothing to say (a retrieval-only goldset has none).
    assert lint_goldset([Answered(q.question, q.locations, q.lines, "yes") for q in questions], [], INDEX) == []
    assert lint_goldset([Q(q.question, q.locations, q.lines) for q in questions], [], INDEX) == []
