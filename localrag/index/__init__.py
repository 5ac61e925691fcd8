"""The index: where it lives, its manifest and locks, its syncs and chunks, its dense search."""
