"""Fake github api for tests (filled in by its issue)."""
