"""`cardcat`: the one command line for operators — database, catalog sync, keys, serving.

This package is the composition root: the only place allowed to import every layer (`serve_app` to
start the scanner and build its index, `training` to render the demo's faces). One module per command
group; this one only puts them together."""

from __future__ import annotations

import click

from cardcat.cli.batches import batches
from cardcat.cli.bulk import bulk
from cardcat.cli.catalog import catalog, index
from cardcat.cli.db import db
from cardcat.cli.events import events, webhooks
from cardcat.cli.keys import keys
from cardcat.cli.prices import prices
from cardcat.cli.serve import demo, serve


@click.group()
def main() -> None:
    """cardcat catalog API and scanner."""


for command in (db, catalog, prices, bulk, index, keys, webhooks, events, batches, serve, demo):
    main.add_command(command)


if __name__ == "__main__":
    main()
