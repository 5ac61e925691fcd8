"""Public benchmarks: BEIR-format datasets read and sampled, downloads by name, TREC run files."""
