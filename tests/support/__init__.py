"""Misbehaving servers of the tests' own (fake Triton /metrics and API, built from recorded payloads)."""
