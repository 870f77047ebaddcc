"""`python -m cardcat.cli`: the same as the `cardcat` script (tests and `cardcat serve` use it)."""

from cardcat.cli import main

main()
