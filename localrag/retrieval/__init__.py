"""Retrieval from an index: LocalRAG, the retriever's stages, the LLM reranker, the chat faces."""
