"""Fake model server for tests (filled in by its issue)."""
