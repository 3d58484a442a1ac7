"""Telemetry maths: counter deltas, rates, link utilisation and health rules over collector samples.

Pure code: no Django, no I/O. Callers (the ingest task, the heat map, placement) feed it samples and timestamps.
"""
