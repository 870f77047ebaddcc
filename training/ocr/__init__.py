"""Training for the print reader (`models/ocr.py`): data, training loop, evaluation."""
