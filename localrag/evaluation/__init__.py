"""Scoring retrieval: metrics, statistics, the result, diagnosis, the LLM judge and the reports."""
