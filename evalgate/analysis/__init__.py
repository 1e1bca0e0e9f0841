"""Pure numbers over runs: statistics, noise, comparison, summaries, prices, releases."""
