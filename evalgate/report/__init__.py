"""Rendering reports: jinja2 templates to terminal text and Markdown; JSON from the models."""
