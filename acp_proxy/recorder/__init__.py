"""The proxy side of recording: the handle transports use, its journal, spool and shipper.

A frame travels in folder order: :mod:`.handle` (what a transport's pump calls) puts it in the
:mod:`.journal` (bounded, overflowing to the :mod:`.spool`), the :mod:`.shipper` sends it in the
:mod:`.ipc` format to the writer process (:mod:`.writer`), which turns it into rows and stores them.
"""
