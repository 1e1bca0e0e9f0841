"""The container entrypoint: the GitHub event, its mode, and what each mode does."""
