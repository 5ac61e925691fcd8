"""What the two command lines (add_pdfs.py, eval_retrieval.py) share: how a parser is made and shows its help."""
from __future__ import annotations

import argparse


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Appends "(default: X)" except to flags whose None default means "the index's"; their help says so."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        return action.help if action.default is None else super()._get_help_string(action)


def new_parser(script_doc: str) -> argparse.ArgumentParser:
    """A parser described by the first line of the script's docstring, with HelpFormatter.

    A shortened flag is an error, never another flag: argparse's abbreviations would read "--output" as
    --output-name.
    """
    return argparse.ArgumentParser(description=script_doc.splitlines()[0], formatter_class=HelpFormatter,
                                   allow_abbrev=False)
