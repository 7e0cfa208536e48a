"""Cross-session memory: what a run may read before its model turn and what it leaves behind after.

The top level holds the seam every store sits behind (`types`), the wire format the memory service and
its HTTP client both speak (`wire`), the read path that builds a run's memory block (`context`) and the
write path that distills a finished run (`reflection`). Beneath them, in the order they may import one
another (each may import those after it, never those before):

- `memory.service`: the HTTP memory service — its ASGI app, `main`, `--workers`, its caches;
- `memory.stores`: the stores (in-process, SQLite, PostgreSQL, the HTTP client) and their selection;
- `memory.ranking`: stems and IDF, the embedder, vectors, the scope index, the fused score;
- `memory.rules`: the pure rules — scopes, the read rule, the write gate, the engine, the scorer,
  retention, redaction.

Nothing here imports the bot (`app`) or its commands; the import contracts in `pyproject.toml` hold it.
"""
