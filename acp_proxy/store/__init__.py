"""The recording store: SQLite and PostgreSQL schemas, opening, reading and editing recordings."""
