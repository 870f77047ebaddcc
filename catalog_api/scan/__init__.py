"""The ingress side of scanning (runs in uvicorn): reading the scan body, fetching a photo URL safely,
the call to the Ray Serve scanner, and `POST /v1/scan`."""
