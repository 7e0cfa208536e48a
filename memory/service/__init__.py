"""The memory service: one durable store shared over HTTP by several bot processes.

The ASGI app (`app`), its entry point (`main`, also `python -m memory.service`), several processes on
one port (`workers`) and the redaction cache of its replies (`redact_cache`). May import the stores and
everything beneath them, never the bot.
"""
