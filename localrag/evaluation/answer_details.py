"""The details file's Answers part, rendered from the report's JSON section (localrag/runs/answering.py), and the
status every verdict carries when it was given. A module without imports, so the details renderer
(localrag/evaluation/diagnosis.py) reaches it without the judge's machinery."""
from __future__ import annotations

OK = "ok"  # a verdict's status when it was given; any other status says why there is none


DETAIL_ANSWER_CHARS = 600  # characters of an answer shown in the details file


def render_answer_details(section: dict, questions: dict[str, str]) -> list[str]:
    """The details file's Answers part (Markdown): per judged question the answer, its citations and each verdict
    with its status and the judge's reason. `questions`: query id -> question text."""
    lines = ["## Answers", "", f"{section['source']}. Each answer as given (cut at {DETAIL_ANSWER_CHARS} "
                               f"characters), its citations and every verdict with the judge's reason.", ""]
    for row in section["questions"]:
        answer = " ".join(row["answer"].split())
        answer = answer if len(answer) <= DETAIL_ANSWER_CHARS else answer[:DETAIL_ANSWER_CHARS - 1] + "…"
        lines += [f"### {row['query_id']}: {questions.get(row['query_id'], '')}", "", f"> {answer}", ""]
        verdict = row["correctness"] or row["correctness_status"]
        reason = f" ({row['correctness_reason']})" if row["correctness_reason"] else ""
        lines.append(f"- correctness: {verdict}{reason}")
        if row["figures"]:
            found, missing = row["figures"]["found"], row["figures"]["missing"]
            lines.append(f"- figures of the reference: {len(found)} stated"
                         + (f", missing: {', '.join(missing)}" if missing else ""))
        if row["supported"] is not None:
            flags = " ".join("+" if flag else "-" for flag in row["supported"])
            lines.append(f"- faithfulness: {sum(row['supported'])} of {len(row['supported'])} sentences supported "
                         f"({flags})" + (f"; {row['faithfulness_reason']}" if row["faithfulness_reason"] else ""))
        else:
            lines.append(f"- faithfulness: {row['faithfulness_status']}")
        citations = row["citations"]
        if citations:
            unparsed = citations["unparsed_texts"]
            lines.append(f"- citations: {citations['parsed']} parsed, {citations['given']} of passages it was "
                         f"given, {citations['not given']} of others, {citations['unparsed']} unparsed"
                         + (f" ({'; '.join(unparsed)})" if unparsed else "")
                         + f"; gold page cited: {'yes' if citations['cites_gold'] else 'no'}")
            recall = [flag for flag in row["citation_recall"].values() if flag is not None]
            precision = [flag for flag in row["citation_precision"] if flag is not None]
            if recall or precision:
                lines.append(f"- ALCE: {sum(recall)} of {len(recall)} cited sentences supported by their "
                             f"citations, {sum(precision)} of {len(precision)} citations needed")
        else:
            lines.append(f"- citations: {row['citation_status']}")
        if row["citation_status"] not in (OK, "no passages"):
            lines.append(f"- citation verdicts: {row['citation_status']}")
        lines.append("")
    return lines
