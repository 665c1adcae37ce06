"""Word-level text augmentations (DECA) and the lexical data they need."""
