"""Presentation: recordings and their analyses rendered as documents people and tools read.

Library code below ``commands/`` and beside ``web/``, so that the CLI and the inspector can
share it: :mod:`~acp_proxy.report.findings` (conformance findings as JUnit XML and SARIF)
and :mod:`~acp_proxy.report.otlp` (a recording as OTLP JSON lines). No click here: the
commands parse options and call these.
"""
