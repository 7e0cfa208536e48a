"""The bot's side of the memory service: a thin client of the service's store over HTTP.

`store` is the client (`HttpMemoryStore`: the data routes, the round trip, timeouts and refusals),
`curating` its curation routes, `replies` how a reply's JSON becomes records. Every rule runs in the
service's own store; the client checks only what the wire needs.
"""

from memory.stores.http.store import HttpMemoryStore

__all__ = ["HttpMemoryStore"]
