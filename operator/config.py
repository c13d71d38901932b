"""Operator settings: which backend the operator drives, read from flags or environment."""
