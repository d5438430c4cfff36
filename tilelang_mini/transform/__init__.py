"""The passes, one per file, and pipeline.py: their one ordered list."""
