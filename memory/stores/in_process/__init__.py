"""The in-process store: records per scope in this process only (tests, demos), lost on restart.

`store` holds the rows and the reads (`InProcessMemoryStore`), `curating` the review queue, edits and
merges over the same rows; every write is planned by memory/stores/writing.py.
"""

from memory.stores.in_process.store import InProcessMemoryStore

__all__ = ["InProcessMemoryStore"]
