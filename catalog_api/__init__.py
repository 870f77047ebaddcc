"""cardcat catalog API: the `/v1` ingress, catalog reads, keys, limits and feed sync."""
