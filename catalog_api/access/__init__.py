"""Who may call `/v1` and how often: API keys, the rate limiter and the gate middleware."""
