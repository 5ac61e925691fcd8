"""localRAG's library: everything the root scripts (local_rag.py, add_pdfs.py, eval_retrieval.py) import.

One module per job; see docs/layout.md.
"""
