"""The result of one evaluation, as the reports show it and the JSON report holds it.

Every value is plain data (text, numbers, tuples, dicts): no retriever object or retrieved chunk lives in a
result. `to_json()` gives the JSON report's content with its keys in the order the report has always written
them; `from_json()` reads a report written earlier (to compare a run with it). A few fields exist only while
the run lasts (marked "not in the JSON report"), so a result read back from disk has their defaults.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

# Exit codes: evaluated and every gate passed; evaluated (report written) but a gate failed or the run is degraded;
# usage or input error, nothing evaluated.
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

Json = dict[str, Any]  # a JSON object as json.loads returns it


@dataclass(frozen=True)
class Status:
    """How an evaluated run ended: its exit code, the gates it checked, the gates that failed and why the run
    is degraded."""

    exit_code: int
    gates: tuple[str, ...] = ()
    failed: tuple[str, ...] = ()
    degraded: tuple[str, ...] = ()

    def to_json(self) -> Json:
        return {"exit_code": self.exit_code, "gates": list(self.gates), "failed": list(self.failed),
                "degraded": list(self.degraded)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Status:
        return cls(data["exit_code"], tuple(data["gates"]), tuple(data["failed"]), tuple(data["degraded"]))


@dataclass(frozen=True)
class StageRanks:
    """Where a question's first acceptable location ranked in each stage's list (None: not in it), in pipeline
    order: "dense" and/or "bm25", "rrf" or "union" when the mode fuses, "rerank" when a reranker ran, "final".

    Ranks count `unit`s: pages or chunks for goldsets (as the run ranks), documents for datasets. `lengths`: how
    far each list reached (the dense and BM25 lists to the diagnostic depth); `pools`: how many entries of the
    dense and BM25 lists were the candidates the later stages saw (the pages those chunks stand on, when ranking
    by page), `pool` chunks per retriever; a rank beyond its pool is just outside it.
    """

    ranks: dict[str, int | None]
    lengths: dict[str, int]
    pools: dict[str, int]
    pool: int
    # What every rank, length and pool counts: "page" (a goldset run ranking by page: each stage's list collapsed
    # to its pages by their best chunk, as the final list is), "chunk"; "" in datasets (documents) and in reports
    # older than the unit (chunks, the final rank in pages).
    unit: str = ""

    def to_json(self) -> Json:
        return {"ranks": self.ranks, "lengths": self.lengths, "pools": self.pools, "pool": self.pool,
                **({"unit": self.unit} if self.unit else {})}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StageRanks:
        return cls(dict(data["ranks"]), dict(data["lengths"]), dict(data["pools"]), data["pool"],
                   data.get("unit", ""))


@dataclass(frozen=True)
class Passage:
    """A retrieved chunk as the details file shows it: its rank in a stage's list, file or document, 1-based
    page (None for datasets), the score of the stage that ordered it and an excerpt (Markdown, query words in
    bold)."""

    rank: int
    source: str
    page: int | None
    score: float
    excerpt: str
    stage: str = "final"


@dataclass(frozen=True)
class ExactRank:
    """A goldset question scored on its expected page itself (tolerance 0) beside the run's page tolerance, from
    the same retrieved list: the rank of the first retrieved page on an expected page (None: none was), and, when
    only the tolerance made the question's rank (a neighbouring page ranked first), that neighbouring page and the
    exact page at `rank` ({source, page}, pages 1-based; `page` None when no exact page was retrieved)."""

    rank: int | None
    via: Json | None = None
    page: Json | None = None

    def to_json(self) -> Json:
        return {"rank_exact": self.rank, **({"via": self.via} if self.via else {}),
                **({"exact_page": self.page} if self.page else {})}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ExactRank | None:
        """The exact rank of a question's JSON; None for a report older than exact ranks (or a dataset's)."""
        if "rank_exact" not in data:
            return None
        rank = data["rank_exact"]
        if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int) or rank < 1):
            raise ValueError(f"question {data['query_id']!r} has the exact rank {rank!r}, not a whole number >= 1 "
                             f"or null")
        return cls(rank, data.get("via"), data.get("exact_page"))


@dataclass(frozen=True)
class QuestionResult:
    """One question's outcome. `locations` are the expected ones ({source, page[, last_page]} for a goldset,
    {doc_id, grade} for a dataset), `top` the first retrieved ({source, page, score} or {doc_id, score})."""

    query_id: str
    question: str
    rank: int | None  # of the first acceptable hit; None when none was retrieved
    metrics: dict[str, float]
    corpus: str = ""
    locations: tuple[Json, ...] = ()
    top: tuple[Json, ...] = ()
    stages: StageRanks | None = None  # None in reports older than stage ranks
    passages: tuple[Passage, ...] = ()  # the first retrieved, for the details file (not in the JSON report)
    gold: Passage | None = None  # the first acceptable chunk any stage's list held (not in the JSON report)
    exact: ExactRank | None = None  # the rank on the exact page (goldsets); None in datasets and older reports

    @property
    def via_tolerance(self) -> bool:
        """Whether only the page tolerance made this question's rank: a neighbouring page ranked before any
        exact one (or none was retrieved)."""
        return self.exact is not None and self.exact.rank != self.rank

    def to_json(self) -> Json:
        return {"query_id": self.query_id, "question": self.question, "corpus": self.corpus,
                "locations": list(self.locations), "rank": self.rank,
                **(self.exact.to_json() if self.exact else {}), "metrics": self.metrics, "top": list(self.top),
                **({"stages": self.stages.to_json()} if self.stages else {})}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> QuestionResult:
        """ValueError when a rank or metric is not what a report holds (an edited report): the comparison would
        otherwise fail far from the file."""
        stages = data.get("stages")
        rank, metrics = data["rank"], dict(data["metrics"])
        if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int) or rank < 1):
            raise ValueError(f"question {data['query_id']!r} has the rank {rank!r}, not a whole number >= 1 or null")
        for key, value in metrics.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
                raise ValueError(f"question {data['query_id']!r} has the {key} {value!r}, not a number")
        return cls(data["query_id"], data.get("question", ""), rank, metrics,
                   data.get("corpus", ""), tuple(data.get("locations", ())), tuple(data.get("top", ())),
                   StageRanks.from_json(stages) if stages else None, exact=ExactRank.from_json(data))


@dataclass(frozen=True)
class CorpusResult:
    """The metrics of the questions of one corpus (goldsets that name several), at the run's page tolerance and
    on the exact page (empty in older reports)."""

    n: int
    metrics: dict[str, float]
    counts: dict[str, int]
    metrics_exact: dict[str, float] = field(default_factory=dict)
    counts_exact: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> Json:
        return {"n": self.n, "metrics": self.metrics, "counts": self.counts,
                **({"metrics_exact": self.metrics_exact, "counts_exact": self.counts_exact}
                   if self.metrics_exact else {})}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CorpusResult:
        return cls(data["n"], dict(data["metrics"]), dict(data["counts"]), dict(data.get("metrics_exact", {})),
                   dict(data.get("counts_exact", {})))


@dataclass(frozen=True)
class NotFound:
    """A question no acceptable hit was retrieved for, with hints why."""

    question: str
    locations: tuple[Json, ...]
    hints: tuple[str, ...]

    def to_json(self) -> Json:
        return {"question": self.question, "locations": list(self.locations), "hints": list(self.hints)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> NotFound:
        return cls(data["question"], tuple(data["locations"]), tuple(data["hints"]))


@dataclass(frozen=True)
class LeftOut:
    """A question left out of the metrics (an invalid expected page), with its goldset lines and why."""

    query_id: str
    question: str
    lines: tuple[int, ...]
    reasons: tuple[str, ...]

    def to_json(self) -> Json:
        return {"query_id": self.query_id, "question": self.question, "lines": list(self.lines),
                "reasons": list(self.reasons)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LeftOut:
        return cls(data["query_id"], data["question"], tuple(data["lines"]), tuple(data["reasons"]))


@dataclass(frozen=True)
class MetricComparison:
    """One metric of two runs over their common questions: means, the paired randomization test's raw and
    Holm-adjusted p-values, the interval of the difference that inverts the test at the family's level, and the
    verdict both give (stats.compare_family)."""

    n: int
    old_mean: float
    new_mean: float
    diff: float
    ci: tuple[float, float]
    p_value: float
    verdict: str
    needed_n: int | None  # questions that would detect the difference; None when there is none to detect
    p_adjusted: float | None = None  # Holm-adjusted over the family; None in reports older than families
    level: float = 0.05  # the interval inverts the test at this level (Holm's last level); 1 - level is shown

    def to_json(self) -> Json:
        return {"n": self.n, "old_mean": self.old_mean, "new_mean": self.new_mean, "diff": self.diff,
                "ci": list(self.ci), "ci_level": 1 - self.level, "p_value": self.p_value,
                "p_adjusted": self.p_adjusted, "verdict": self.verdict, "needed_n": self.needed_n}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MetricComparison:
        low, high = data["ci"]
        return cls(data["n"], data["old_mean"], data["new_mean"], data["diff"], (low, high), data["p_value"],
                   data["verdict"], data["needed_n"], data.get("p_adjusted"), round(1 - data.get("ci_level", 0.95), 12))


@dataclass(frozen=True)
class RankMove:
    """A question whose first acceptable rank changed between two runs (None = not found)."""

    query_id: str
    question: str
    old_rank: int | None
    new_rank: int | None
    lost_at: str = ""  # for a worse question: the stage that pushed it below its old rank

    def to_json(self) -> Json:
        return {"query_id": self.query_id, "question": self.question, "old_rank": self.old_rank,
                "new_rank": self.new_rank, **({"lost_at": self.lost_at} if self.lost_at else {})}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RankMove:
        return cls(data["query_id"], data["question"], data["old_rank"], data["new_rank"], data.get("lost_at", ""))


@dataclass(frozen=True)
class Comparison:
    """A run compared with an earlier one (`old_label` names it), metric by metric, plus the moved questions."""

    old_label: str
    n: int  # common questions compared
    note: str  # why fewer questions than either run has were compared; "" when all were
    metrics: dict[str, MetricComparison]
    resamples: int
    seed: int
    improved: tuple[RankMove, ...]
    worsened: tuple[RankMove, ...]
    # Settings of the two runs that differ ("chunk_size 2000 → 800"); the note says why that is unknown (a report
    # written before reports had `settings`). Both are left out of the JSON when empty.
    settings_changed: tuple[str, ...] = ()
    settings_note: str = ""
    # The family of tests this comparison's verdicts are adjusted over, in words ("4 metrics", "6 rows x 2 metrics
    # = 12 comparisons"); "" in reports older than families. `alpha`: the family-wise level.
    family: str = ""
    alpha: float = 0.05

    def to_json(self) -> Json:
        payload = {"old_label": self.old_label, "n": self.n, "note": self.note,
                   "metrics": {key: c.to_json() for key, c in self.metrics.items()}, "resamples": self.resamples,
                   "seed": self.seed, "family": self.family, "alpha": self.alpha,
                   "improved": [m.to_json() for m in self.improved],
                   "worsened": [m.to_json() for m in self.worsened]}
        if self.settings_changed:
            payload["settings_changed"] = list(self.settings_changed)
        if self.settings_note:
            payload["settings_note"] = self.settings_note
        return payload

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Comparison:
        return cls(data["old_label"], data["n"], data["note"],
                   {key: MetricComparison.from_json(c) for key, c in data["metrics"].items()}, data["resamples"],
                   data["seed"], tuple(map(RankMove.from_json, data["improved"])),
                   tuple(map(RankMove.from_json, data["worsened"])), tuple(data.get("settings_changed", ())),
                   data.get("settings_note", ""), data.get("family", ""), data.get("alpha", 0.05))


@dataclass(frozen=True)
class EvalResult:
    """One evaluated configuration over a goldset (kind "goldset") or a BEIR dataset (kind "dataset")."""

    kind: str
    title: str
    metrics: dict[str, float]  # mean per metric key, in report order
    num_queries: int
    per_query: tuple[QuestionResult, ...]
    name: str = ""  # the configuration, e.g. "hybrid + rerank" (not in the JSON report)
    depth: int = 0  # results retrieved per question (not in the JSON report)
    goldset: str = ""  # what was evaluated: "goldset eval/goldset.csv", "dataset scifact (test)"
    generated: str = ""  # when the reports were written
    status: Status | None = None
    config: tuple[tuple[str, str], ...] = ()  # (label, value) rows of the configuration block
    counts: dict[str, int] = field(default_factory=dict)  # questions found per Hit@k (goldsets)
    per_corpus: dict[str, CorpusResult] = field(default_factory=dict)
    not_found: tuple[NotFound, ...] = ()
    left_out: tuple[LeftOut, ...] = ()
    judge: Json | None = None  # the LLM judge's section as the judge module writes it
    judge_lines: tuple[str, ...] = ()  # that section as text (not in the JSON report)
    answers: Json | None = None  # the answer-level section (localrag/runs/answering.py)
    answer_lines: tuple[str, ...] = ()  # that section as text (not in the JSON report)
    compare: Comparison | None = None
    messages: tuple[str, ...] = ()  # notes shown above the results
    seconds: float = 0.0  # wall time of retrieval and scoring (not in the JSON report)
    stage_k: int = 0  # the cutoff of "Where the misses are lost"; 0 when the questions have no stage ranks
    details: str = ""  # the details file beside the report, as the report names it; "" when none was written
    # The configuration as machine-readable values ({"chunk_size": 2000, "retrieval_mode": "hybrid", ...}) beside
    # the display strings of `config`; empty in a report written before it existed.
    settings: dict[str, Any] = field(default_factory=dict)
    # A goldset's figures on the exact page (tolerance 0) beside `metrics` and `counts` (at `page_tolerance`), from
    # the same retrieved lists; empty (and the tolerance None) in datasets and in reports older than them.
    page_tolerance: int | None = None
    metrics_exact: dict[str, float] = field(default_factory=dict)
    counts_exact: dict[str, int] = field(default_factory=dict)
    # The metric keys a comparison tests (scoring.tested_keys); empty: every one (datasets, older reports).
    tested: tuple[str, ...] = ()

    @property
    def ranks(self) -> dict[str, int | None]:
        """query_id -> first acceptable rank (None = not found)."""
        return {q.query_id: q.rank for q in self.per_query}

    @property
    def identity(self) -> str:
        """What the run evaluated; a report older than the goldset field gives its title."""
        return self.goldset or self.title

    def to_json(self) -> Json:
        """The JSON report: every key in its fixed place, optional sections only when they hold something."""
        payload: Json = {"generated": self.generated, "title": self.title, "kind": self.kind,
                         **({"goldset": self.goldset} if self.goldset else {}),
                         **({"status": self.status.to_json()} if self.status else {}),
                         "config": dict(self.config), **({"settings": self.settings} if self.settings else {}),
                         "metrics": self.metrics,
                         **({"page_tolerance": self.page_tolerance, "metrics_exact": self.metrics_exact}
                            if self.metrics_exact else {}),
                         **({"tested": list(self.tested)} if self.tested else {}),
                         "num_queries": self.num_queries, "per_query": [q.to_json() for q in self.per_query]}
        optional = {"counts": self.counts, "counts_exact": self.counts_exact,
                    "per_corpus": {corpus: entry.to_json() for corpus, entry in self.per_corpus.items()},
                    "not_found": [entry.to_json() for entry in self.not_found],
                    "left_out": [entry.to_json() for entry in self.left_out],
                    "judge": self.judge, "answers": self.answers, "compare": self.compare.to_json() if self.compare else None,
                    "messages": list(self.messages), "stage_k": self.stage_k, "details": self.details}
        payload.update((key, value) for key, value in optional.items() if value)
        return payload

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> EvalResult:
        """A result from a JSON report; KeyError, TypeError or ValueError when `data` is not one."""
        status, compare = data.get("status"), data.get("compare")
        for field_name in ("metrics", "metrics_exact"):
            for key, value in data.get(field_name, {}).items():
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise ValueError(f"the metric {key} {'on the exact page ' if field_name != 'metrics' else ''}"
                                     f"is {value!r}, not a number")
        return cls(kind=data.get("kind", ""), title=data.get("title", ""), metrics=dict(data["metrics"]),
                   num_queries=data.get("num_queries", len(data["per_query"])),
                   per_query=tuple(map(QuestionResult.from_json, data["per_query"])),
                   goldset=data.get("goldset", ""), generated=data.get("generated", ""),
                   status=Status.from_json(status) if status else None,
                   config=tuple(data.get("config", {}).items()), counts=dict(data.get("counts", {})),
                   per_corpus={c: CorpusResult.from_json(e) for c, e in data.get("per_corpus", {}).items()},
                   not_found=tuple(map(NotFound.from_json, data.get("not_found", ()))),
                   left_out=tuple(map(LeftOut.from_json, data.get("left_out", ()))), judge=data.get("judge"),
                   answers=data.get("answers"),
                   compare=Comparison.from_json(compare) if compare else None,
                   messages=tuple(data.get("messages", ())), stage_k=data.get("stage_k", 0),
                   details=data.get("details", ""), settings=dict(data.get("settings", {})),
                   page_tolerance=data.get("page_tolerance"), metrics_exact=dict(data.get("metrics_exact", {})),
                   counts_exact=dict(data.get("counts_exact", {})), tested=tuple(data.get("tested", ())))
