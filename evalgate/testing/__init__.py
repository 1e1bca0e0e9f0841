"""Test helpers shipped with evalgate: stand-ins of remote services for tests and benchmarks."""
