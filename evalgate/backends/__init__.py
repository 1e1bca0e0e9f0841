"""Backends turn a Request into a Reply. See base.py for the protocol and the registry."""
