"""localRAG's library: everything the root scripts (local_rag.py, add_pdfs.py, eval_retrieval.py) import.

One module per job; see README.md, "How the code is laid out".
"""
