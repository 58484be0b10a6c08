"""ACP semantics over classified frames (sans-I/O).

``exchanges`` (request/response pairing, ``initialize`` facts) and ``updates`` (the
``session/update`` vocabulary) are the shared ground; ``index`` (the recorder's columns),
``model`` and ``timeline`` (``show``), ``stats`` and ``conformance``/``rules`` (``check``)
are built on them.
"""
