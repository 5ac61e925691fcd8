"""Goldsets: their format and matching, lint, and generated questions."""
