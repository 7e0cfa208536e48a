"""How a store ranks a scope's records for a query: lexical stems and IDF (`lexical`), the local
embedder (`embedder`), stored vectors and cosine arithmetic (`vectors`), one scope held as arrays
(`scope_index`) and the one fused score every store shares (`fusion`).

Pure computation over values handed in (numpy, the stemmer, an embedder's weights loaded from an
installed package); no store and no network. May import only `memory.rules` and `memory.types`.
"""
