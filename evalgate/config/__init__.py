"""evalgate.yml: its schema, its loading (with YAML positions for errors), its docs."""
