"""Loopback stand-ins of the Messages, chat completions and GitHub REST APIs, for tests and
benchmarks only: they are not part of the evalgate distribution or its image."""
