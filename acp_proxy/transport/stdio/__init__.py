"""ACP over stdio: the stdio proxy, the stdin side of ``connect``, replay and ``--client``."""
