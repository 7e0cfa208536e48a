"""Operating the servers: slow-client protection, Prometheus metrics, OpenTelemetry tracing.

Shared by the memory service (`memory/`) and the bot (`app/`); it imports nothing else of ours, so
both may import it (an import-linter contract holds it to that).
"""
