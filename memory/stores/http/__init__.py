"""The bot's side of the memory service: the store front over the service's routes.

`store` is the store (`HttpMemoryStore`, a `StoreFront`) and its backend, `calls` the round trip and
what its failure is, `reads` and `curating` the backend's primitives as routes, `replies` how a
reply's JSON becomes records.
"""

from memory.stores.http.store import HttpMemoryStore

__all__ = ["HttpMemoryStore"]
