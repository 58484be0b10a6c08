"""Formats a recording is exported to or imported from: JSONL (with redaction) and OTLP."""
