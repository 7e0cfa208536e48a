"""The agent: agent definitions, the agent loop (`runner`), tools, and the model providers.

May import `app.incoming`, `config` and the model SDKs; never a surface (`app.slack`, `app.terminal`)
and never `app.github` (GitHub plugs its tools and runners in from outside).
"""
