"""Pure search over vectors and words: BM25, fusion of ranked lists, the IVF; no index here."""
