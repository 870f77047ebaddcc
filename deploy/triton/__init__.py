"""Serving the scanner's networks from a Triton Inference Server: export, a local server, its env."""
