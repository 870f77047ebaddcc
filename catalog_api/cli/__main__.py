"""`python -m catalog_api.cli`: the same as the `cardcat` script (tests and `cardcat serve` use it)."""

from catalog_api.cli import main

main()
