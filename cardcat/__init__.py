"""The composition root: the `cardcat` command line (`cardcat.cli`) and the local stack that the
tests and benchmarks start (`cardcat.stack`: a database, the real CLI, server processes, the scanner).

It is the top layer: the only package that puts the catalog API, the scanner, training and deploy
together, and no package below imports it (tests/test_layers.py)."""
