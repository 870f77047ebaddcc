"""Getting the catalog in: the upstream feed's rules, `cardcat catalog sync`, the demo catalog."""
