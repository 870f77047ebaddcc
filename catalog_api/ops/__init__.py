"""Operational routes: `/health`, the image store's files, the benchmark's static route."""
