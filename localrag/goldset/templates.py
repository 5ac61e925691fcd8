"""Model-free goldset questions found in a chunk's text: exact references (equations, tables, figures at
their definition site), numbered sections and defined terms, each written from a template in English or German.

The finders are regular expressions over the chunk's lines and sentences; each question is a Candidate that
names the words it may share with its chunk (the reference, the term, the template's frame), so the generator's
copy gate does not count them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from localrag.goldset.noise import PROSE_LINE_MIN_WORDS, header_key, nonempty_lines
from localrag.text.words import CONTENT_STOPWORDS, tokens

# Longest defined term, in words.
DEFINED_TERM_MAX_WORDS = 4
# Longest section heading turned into a question, in words.
HEADING_MAX_WORDS = 10
# More numbered headings than this in one chunk make a list (contents, exhibits), not section starts.
MAX_HEADINGS_PER_CHUNK = 3

# Question templates: (kind, language) -> format string.
TEMPLATES = {
    ("equation-ref", "en"): "What does Equation {num} state?",
    ("equation-ref", "de"): "Was besagt Gleichung {num}?",
    ("table-ref", "en"): "What does Table {num} show?",
    ("table-ref", "de"): "Was zeigt Tabelle {num}?",
    ("figure-ref", "en"): "What does Figure {num} show?",
    ("figure-ref", "de"): "Was zeigt Abbildung {num}?",
    ("section-ref", "en"): "What is covered in {unit} {num}?",
    ("section-ref", "de"): "Was behandelt {unit} {num}?",
    ("section-location", "en"): "Which {unit_lower} discusses {title}?",
    ("section-location", "de"): "{which} {unit} behandelt {title}?",
    ("defined-term-is", "en"): "What is {term}?",
    ("defined-term-are", "en"): "What are {term}?",
    ("defined-term-measures", "en"): "What does {term} measure?",
    ("defined-term", "de"): "Was versteht man unter {term}?",
}
# Words of the templates: the frame of a template question, never counted as copied.
TEMPLATE_WORDS = frozenset(
    word.casefold()
    for template in TEMPLATES.values()
    for word in re.findall(r"[^\W\d_]+", template)
) | frozenset("section chapter abschnitt kapitel welcher welches".split())

# Heading units: keyword in the text -> (English unit, German unit).
HEADING_UNITS = {
    "section": ("Section", "Abschnitt"),
    "chapter": ("Chapter", "Kapitel"),
    "abschnitt": ("Section", "Abschnitt"),
    "kapitel": ("Chapter", "Kapitel"),
}
# German interrogative per unit ("Welcher Abschnitt", "Welches Kapitel").
GERMAN_WHICH = {"Abschnitt": "Welcher", "Kapitel": "Welches"}

# First words that make a "X is a ..." sentence no definition ("This is a ...", "The result is the ...").
NOT_A_TERM = frozenset(
    """this that these those it its there here which what who one each every such our your his her their
    my some any all both either neither another other same former latter first second third next last
    following above below result results answer problem solution proof idea goal aim reason purpose point
    question difference example case figure table equation section chapter main key only new way
    company firm management author authors paper study article book report document text
    der die das den dem des ein eine einer eines dies diese dieser dieses es er sie hier dabei damit daher
    dann man wir ergebnis folgende folgendes beispiel abbildung tabelle gleichung abschnitt kapitel grund
    ziel frage antwort lösung idee problem unterschied vorteil nachteil erste zweite nächste letzte
    andere jede jeder jedes solche unser unsere
    thus hence therefore however also so then now finally clearly note recall again moreover furthermore
    similarly if when since because although while after before during under with without for at on by
    also somit deshalb jedoch nun zudem ebenso außerdem wenn weil da ob nachdem bevor während
    provided shown listed included presented described summarized set given attached enclosed""".split()
)
# Last words that make an inverted sentence ("Provided below is a ..."), not a term.
NOT_A_TERM_END = frozenset("below above here there following hereto unten oben folgend".split())
# Pronouns: a "term" containing one is a clause ("The model we use is a ..."), not a name.
PRONOUNS = frozenset("i you he she we they me us them ich du er sie wir ihr es man".split())
# Function words allowed inside a term ("vega of an option", "Wert des Portfolios").
TERM_CONNECTORS = frozenset("of for and the a an von für und der des dem im eines einer".split())

# --- Patterns -------------------------------------------------------------------------------------
_NUMBER = r"\d{1,2}(?:\.\d{1,3}){0,2}[a-z]?"
# Equation number tag at the end of a line: "C = S N(d1) - K e^{-rT} N(d2)   (21.23)".
_EQUATION_TAG = re.compile(rf"^(?P<body>.*?)\s*\((?P<num>{_NUMBER})\)\s*$")
_RELATION = re.compile(r"[=<>≤≥≈≡∝]")
# Caption at the start of a line: "Table 4: ...", "Table 4. ...", "Table 4 Prices ...", "Abb. 3 ...".
_CAPTION_TAIL = r"(?=:|\.\s+\S|\s+[A-ZÄÖÜ])"
_TABLE_CAPTION = re.compile(rf"^(?P<label>Table|Tab\.|Tabelle)\s+(?P<num>{_NUMBER}){_CAPTION_TAIL}")
_FIGURE_CAPTION = re.compile(rf"^(?P<label>Figure|Fig\.|Abbildung|Abb\.)\s+(?P<num>{_NUMBER}){_CAPTION_TAIL}")
# "3.2 Option Pricing" (at least two number parts: a lone "3 Options" is too often a list item).
_NUMBERED_HEADING = re.compile(r"^(?P<num>\d{1,2}(?:\.\d{1,2}){1,3})\.?\s+(?P<title>[A-ZÄÖÜ].*)$")
# Any line opening with a "3.2"-style number, heading or not: many of them make a list.
_NUMBERED_LINE = re.compile(r"^\d{1,3}(?:\.\d{1,3})+[A-Z]?\.?\s")
_KEYWORD_HEADING = re.compile(
    r"^(?P<unit>Section|Chapter|Abschnitt|Kapitel)\s+(?P<num>\d{1,2}(?:\.\d{1,2}){0,3})[:.]?\s+"
    r"(?P<title>[A-ZÄÖÜ].*)$"
)
_TERM_WORD = r"[^\W\d_][\w\-]*"
# Words of a term are separated by spaces, not line breaks: a heading line above a sentence is no part of it.
_TERM = rf"{_TERM_WORD}(?:[^\S\n]+{_TERM_WORD}){{0,{DEFINED_TERM_MAX_WORDS - 1}}}"
_GERMAN_TERM = rf"{_TERM_WORD}(?:[^\S\n]+{_TERM_WORD}){{0,{DEFINED_TERM_MAX_WORDS + 1}}}"
# Optional article and "term"/"concept" before an English term: "The term gamma refers to".
_EN_LEAD = rf"(?:(?P<article>The|An?)[^\S\n]+)?(?P<label>(?:term|concept)[^\S\n]+)?(?P<term>{_TERM})\s+"
_DE_LEAD = rf"(?:(?:Der|Die|Das|Ein|Eine)[^\S\n]+)?(?:Begriff[^\S\n]+)?(?P<term>{_TERM})\s+"
# English definitions at a sentence start; group "verb" picks the question template.
_EN_DEFINITIONS = (
    re.compile(rf"{_EN_LEAD}(?P<verb>is)\s+defined\s+as\b"),
    re.compile(rf"{_EN_LEAD}(?P<verb>is|are)\s+(?:a|an|the)\s"),
    re.compile(rf"{_EN_LEAD}(?P<verb>refers\s+to|denotes)\s"),
    re.compile(rf"{_EN_LEAD}(?P<verb>measures)\s+(?:the|a|an|how|whether)\b"),
)
# German definitions: "Unter X versteht man", "X ist ein ...", "X bezeichnet", "X wird definiert als".
_DE_DEFINITIONS = (
    re.compile(
        rf"Unter\s+(?P<article>(?:dem|der|den|einem|einer|einen)\s+)?(?P<term>{_GERMAN_TERM})\s+versteht\s+man\b"
    ),
    re.compile(rf"{_DE_LEAD}(?:ist|sind)\s+(?:ein|eine|einer|der|die|das|definiert\s+als)\s"),
    re.compile(rf"{_DE_LEAD}bezeichnet\s"),
    re.compile(rf"{_DE_LEAD}wird\s+(?:definiert|bezeichnet)\s+als\b"),
)
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+(?=[A-ZÄÖÜ])")
# Word before a period that does not end a sentence ("Mr. Weeks", "Abb. 3", initials "Wendell P. Weeks").
_ABBREVIATION = re.compile(
    r"(?:\b(?:mr|mrs|ms|dr|prof|st|inc|co|corp|ltd|no|nr|fig|eq|vs|etc|approx|e\.g|i\.e|bzw|z\.b|ca|vgl|abb|s)"
    r"|(?-i:\b[A-Z]))\.\s*$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Candidate:
    """A question proposed for a chunk, before the gates; ``allowed`` words never count as copied."""

    kind: str
    question: str
    language: str
    allowed: frozenset[str] = frozenset()


def _reference_candidate(kind: str, num: str, language: str) -> Candidate:
    question = TEMPLATES[(kind, language)].format(num=num)
    return Candidate(kind, question, language, frozenset(tokens(num)) | TEMPLATE_WORDS)


def reference_questions(text: str, language: str) -> list[Candidate]:
    """Exact-reference questions for equations, tables and figures defined in the text.

    Only definition sites count: an equation tag ``(21.23)`` closing a line with a relation sign
    (on that line or, for a tag on its own line, the line before), and captions at a line start
    (``Table 4: ...``, ``Abb. 3 Verlauf ...``). A mere mention ("see Table 4") points to another page.
    """
    candidates: list[Candidate] = []
    lines = nonempty_lines(text)
    for index, line in enumerate(lines):
        tag = _EQUATION_TAG.match(line)
        if tag:
            body = tag["body"] or (lines[index - 1] if index else "")
            if _RELATION.search(body):
                candidates.append(_reference_candidate("equation-ref", tag["num"], language))
        for kind, pattern in (("table-ref", _TABLE_CAPTION), ("figure-ref", _FIGURE_CAPTION)):
            caption = pattern.match(line)
            if caption:
                candidates.append(_reference_candidate(kind, caption["num"], language))
    return candidates


def _heading_title_ok(title: str) -> bool:
    """A heading title: a few words, not a sentence, no page number or dates, no formula or table row.

    Rejects e.g. "Apple 45" (contents line), "Form of Agreement* 10-Q 6/26/09" (exhibit list).
    """
    words = title.split()
    return (
        len(words) <= HEADING_MAX_WORDS
        and not re.search(r"[.,;:?!]$", title)
        and sum(bool(re.search(r"\d", word)) for word in words) == 0
        and not re.search(r"[=*/|$%€£]", title)
        and len(re.findall(r"[^\W\d_]", title)) >= 2
    )


def section_questions(text: str, language: str, repeated: frozenset[str] = frozenset()) -> list[Candidate]:
    """Section-reference and section-location questions from numbered headings in the text.

    Headings are ``3.2 Title`` lines (two or more number parts) and ``Chapter 3 Title`` /
    ``Kapitel 3 Title`` lines. Skipped: lines in ``repeated`` (running headers sit on every page
    of a section, not where it starts), the last line (the chunk may cut it, and its section's
    text is in the next chunk), and chunks with more than MAX_HEADINGS_PER_CHUNK lines that start
    with a ``3.2``-style number (a list of contents or exhibits, or a table; not section starts).
    """
    lines = nonempty_lines(text)
    if sum(bool(_NUMBERED_LINE.match(line)) for line in lines) > MAX_HEADINGS_PER_CHUNK:
        return []
    headings = []
    for line in lines[:-1]:
        match = None if header_key(line) in repeated else _NUMBERED_HEADING.match(line) or _KEYWORD_HEADING.match(line)
        if match and _heading_title_ok(match["title"]):
            headings.append(match)
    candidates: list[Candidate] = []
    for match in headings:
        keyword = match.groupdict().get("unit")
        english_unit, german_unit = HEADING_UNITS[keyword.casefold() if keyword else "section"]
        unit = german_unit if language == "de" else english_unit
        num, title = match["num"], " ".join(match["title"].split())
        frame = frozenset(tokens(num)) | TEMPLATE_WORDS
        reference = TEMPLATES[("section-ref", language)].format(unit=unit, num=num)
        location = TEMPLATES[("section-location", language)].format(
            unit=unit, unit_lower=unit.lower(), which=GERMAN_WHICH.get(unit, ""), title=title
        )
        candidates.append(Candidate("section-ref", reference, language, frame))
        candidates.append(Candidate("section-location", location, language, frame | frozenset(tokens(title))))
    return candidates


def _sentence_starts(text: str) -> tuple[str, list[int]]:
    """Non-empty lines joined by newlines, and the offsets where sentences start.

    A sentence starts at the text start, after ``. ! ?`` plus space before a capital (not after an
    abbreviation or an initial), and at a line whose previous line ends a sentence or is a
    heading-like short line without punctuation.
    """
    lines = nonempty_lines(re.sub(r"([a-zäöüß])-\n\s*([a-zäöüß])", r"\1\2", text))
    joined, starts, offset = "", [], 0
    for index, line in enumerate(lines):
        previous = lines[index - 1] if index else ""
        if not index or previous.endswith((".", "!", "?", ":")) or (
            len(previous.split()) < PROSE_LINE_MIN_WORDS and not previous.endswith((",", "-"))
        ):
            starts.append(offset)
        joined += line + "\n"
        offset = len(joined)
    starts.extend(
        match.end() for match in _SENTENCE_BREAK.finditer(joined)
        if not _ABBREVIATION.search(joined[max(0, match.start() - 8):match.start()])
    )
    return joined, sorted(set(starts))


def _english_term(term: str, text: str) -> str:
    """Lower-case a capital that is only there because the term starts a sentence (``Vega`` -> ``vega``).

    Kept for names: a word with inner capitals (``Black-Scholes``), a term with more capitalised
    words (``Monte Carlo``), or a first word the text also capitalises in mid-sentence (``Corning``).
    """
    first, *rest = term.split(" ")
    mid_sentence = re.search(rf"[a-zäöüß,;][^\S\n]+{re.escape(first)}\b", text)
    if first[:1].isupper() and first[1:].islower() and not any(w[:1].isupper() for w in rest) and not mid_sentence:
        return first[0].lower() + first[1:] + (" " + " ".join(rest) if rest else "")
    return term


def _term_ok(term: str) -> bool:
    """A term: >= 3 characters, no generic first word, no pronoun or non-connector function word."""
    words = term.casefold().split()
    inner_ok = all(w not in PRONOUNS and (w in TERM_CONNECTORS or w not in CONTENT_STOPWORDS) for w in words)
    ending_ok = words[-1] not in CONTENT_STOPWORDS and words[-1] not in NOT_A_TERM_END
    return len(term) >= 3 and words[0] not in NOT_A_TERM and ending_ok and inner_ok


def defined_term_questions(text: str, language: str) -> list[Candidate]:
    """Questions for terms the text defines at a sentence start.

    English: "X is defined as", "X is/are a|an|the ...", "X refers to", "X denotes", "X measures the";
    German: "Unter X versteht man", "X ist/sind ein|eine|der|die|das ...", "X bezeichnet",
    "X wird definiert als". A leading article is dropped; generic subjects (NOT_A_TERM) are ignored.
    """
    joined, starts = _sentence_starts(text)
    patterns = _DE_DEFINITIONS if language == "de" else _EN_DEFINITIONS
    candidates: list[Candidate] = []
    for start in starts:
        if not joined[start:start + 1].isupper():
            continue
        for pattern in patterns:
            match = pattern.match(joined, start)
            if not match:
                continue
            term = " ".join(match["term"].split())
            if not _term_ok(term):
                continue
            if language == "de":
                article = (match.groupdict().get("article") or "").strip()
                question = TEMPLATES[("defined-term", "de")].format(term=f"{article} {term}".strip())
            else:
                verb = match["verb"].split()[0]
                template = {"are": "defined-term-are", "measures": "defined-term-measures"}.get(verb, "defined-term-is")
                article = "" if match.groupdict().get("label") else (match["article"] or "").lower()
                question = TEMPLATES[(template, "en")].format(term=f"{article} {_english_term(term, joined)}".strip())
            # The article belongs to the term ("unter einem Future"): copying it is no copying of content.
            allowed = frozenset(tokens(f"{article} {term}")) | TEMPLATE_WORDS
            candidates.append(Candidate("defined-term", question, language, allowed))
            break
    return candidates


def template_questions(text: str, language: str, repeated: frozenset[str] = frozenset()) -> list[Candidate]:
    """All model-free questions for one chunk text, duplicates removed, in detection order."""
    found = reference_questions(text, language) + section_questions(text, language, repeated)
    found += defined_term_questions(text, language)
    unique: dict[str, Candidate] = {}
    for candidate in found:
        unique.setdefault(candidate.question, candidate)
    return list(unique.values())
