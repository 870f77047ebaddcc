"""What every room of the ingress shares: settings, db, ORM models, the envelope and the one error->HTTP
mapping, pagination, cache, the network guard, the image store and the record shapes. What the scanner
shares with the ingress (the scan contract, errors, photo limits, card text) is one layer down, in `core`.

The kit imports no room, so any room may import it without making a circle."""
