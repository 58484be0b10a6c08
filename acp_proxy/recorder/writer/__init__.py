"""The writer process: journal items in, rows out, one sink per engine (entry: :mod:`.main`)."""
