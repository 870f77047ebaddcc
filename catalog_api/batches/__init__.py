"""Scan batches: thousands of photos a job, scanned by a durable queue's workers (issue #44)."""
