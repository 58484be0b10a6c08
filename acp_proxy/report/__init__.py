"""Presentation: recordings and their analyses rendered as documents people and tools read.

Library code below ``commands/`` and beside ``web/``, so that the CLI and the inspector can
share it: :mod:`~acp_proxy.report.findings` (conformance findings as JUnit XML and SARIF),
:mod:`~acp_proxy.report.otlp` (a recording as OTLP JSON lines),
:mod:`~acp_proxy.report.conversation` (a recording as the conversation ``show`` prints) and
:mod:`~acp_proxy.report.text` (times and frames as text lines read them). No click here:
the commands parse options and call these.
"""
