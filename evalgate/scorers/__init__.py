"""Scorers turn (case, reply text) into (answer, score, format_ok). Registry in base.py."""
