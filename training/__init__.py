"""Training, evaluation and data generation for the scanner's models."""
