"""Prices: `cardcat prices sync`, current prices, movers, daily snapshot files and their routes."""
