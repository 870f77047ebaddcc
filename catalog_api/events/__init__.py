"""Outbound events: the outbox, Standard Webhooks signing, webhook endpoints and the deliverer."""
