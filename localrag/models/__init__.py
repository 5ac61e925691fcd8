"""The models on this machine: the embedding model and the cross-encoder, their faster backends, the LLM client."""
