"""The terminal surface: `switchboard chat`, a thread in this terminal.

May import the core and `config`; never the Slack surface.
"""
