"""The gate: a comparison and a policy in, a verdict with its reasons out (pure)."""
