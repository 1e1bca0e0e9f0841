"""The run file: its schema, saving, finding and loading runs, merging shards, history."""
