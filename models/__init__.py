"""Scanner models: one module per task, each shared by serving and training (`training/` imports them)."""
