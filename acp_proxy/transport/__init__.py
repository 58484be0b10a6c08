"""Transports: thin adapters that move bytes and hand copies to the recorder."""
