"""Recording to SQLite: schema and migrations, the writer thread, and reading back."""
