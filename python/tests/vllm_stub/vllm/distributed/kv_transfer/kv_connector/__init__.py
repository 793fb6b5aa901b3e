"""Stub package (tests only)."""
