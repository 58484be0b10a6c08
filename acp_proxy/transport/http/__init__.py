"""ACP over Streamable HTTP: the ``/acp`` endpoint of ``serve``, its relay, ``connect``, replay."""
