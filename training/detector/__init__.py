"""Card detector training, evaluation and export."""
