"""Everything that speaks Slack: the Bolt app, event → `IncomingMessage` translation, the thread surface
(status, streaming), mrkdwn formatting, the in-memory delivery state, and `serve`.

May import the core (`app.dispatch`, `app.incoming`, `app.surface`, `app.runtime`, …), `commands`
and `config`; never the terminal surface.
"""
