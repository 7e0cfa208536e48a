"""Where records persist, every store behind the contract of `memory.stores.contract`.

One write algorithm (`writing`) and one curation front (`front`) over backends with one shape: the
in-process backend (`in_process`), SQLite with one database per scope (`sqlite`), PostgreSQL for
several replicas (`postgres`); the memory service's thin HTTP client (`http`), the disabled store
(`null`), and the choice among them at start-up (`build`). Every decision a store persists comes from
`memory.rules`. May import the rules, ranking, the seam and the wire format; never the service, the
read path or the write path.
"""
