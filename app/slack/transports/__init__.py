"""How Slack's events reach the bot: over HTTP (`http`: the signed Events API endpoint; `http_site`:
the listening site with health and metrics) or over Socket Mode (`socket_mode`), and `serve`, which
picks one from the configuration and runs the bot until it is told to stop."""
