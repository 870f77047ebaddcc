"""The catalog read side: the per-worker read model and search, the card repository, `/v1/cards` and the
reference tables (series, expansions, products)."""
