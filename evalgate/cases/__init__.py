"""What is evaluated: case files, prompts and templating, the split, the holdout, importers."""
