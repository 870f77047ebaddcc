"""Card-face embedder training: data (synthetic rectified photos), train, evaluate."""
