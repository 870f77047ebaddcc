"""Face check (#43): card faces against backs and empty holders."""
