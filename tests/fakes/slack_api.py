"""Fake slack api for tests (filled in by its issue)."""
