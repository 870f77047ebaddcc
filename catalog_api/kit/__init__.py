"""What every room of the ingress shares: settings, db, ORM models, the envelope and the one error->HTTP
mapping, pagination, cache, the network guard, card text rules and the typed scan contract.

The kit imports no room, so any room may import it without making a circle."""
