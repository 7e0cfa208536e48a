"""Where records persist, every one behind the `MemoryStore` seam of `memory.types`.

The disabled and in-process stores (`in_process`), SQLite with one database per scope (`sqlite`),
PostgreSQL for several replicas (`postgres`), the memory service's HTTP client (`http`) and the choice
among them at start-up (`build`). Every decision a store persists comes from `memory.rules.engine`.
May import the rules, ranking, the seam and the wire format; never the service, the read path or the
write path.
"""
