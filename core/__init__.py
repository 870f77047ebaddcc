"""What the catalog API, the scanner and training share, and which imports no framework of ours or theirs:
the typed scan contract between the ingress and the scanner, the API's errors and their codes, photo
limits, card text rules, the catalog's vocabulary and device resolution.

`core` is the bottom layer: it imports nothing of ours, so `catalog_api` and `serve_app` sit beside
each other over it (and over `models`) instead of one importing the other (tests/test_layers.py)."""
