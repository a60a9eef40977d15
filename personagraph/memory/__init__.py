"""Long-term memory for persona agents: a Chroma bank, offline embeddings, recall and retrieval metrics."""
