"""The pure rules of memory: no I/O, no clock of their own, no store.

Scope keys (`scope`), the read rule (`visibility`), the write gate's seam (`write_gate`), the engine that
plans writes and evictions (`engine`), the scorer and the block budget (`scorer`), retention
(`retention`), the read audit's matching rule (`audit`) and redaction (`redact`). Every store, the read
path and the write path call these same functions, so a rule lives in one place. May import only
`memory.types` and each other.
"""
