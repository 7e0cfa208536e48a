"""Model providers: one adapter per SDK (Anthropic, OpenAI) behind `base.Provider`, and the registry.

May import `config` and the SDKs; nothing else of the bot.
"""
