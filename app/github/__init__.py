"""The GitHub binding: the REST client, the coding tools, repo resolution, the review agent, the wiring.

May import the core (`app.dispatch`, `app.incoming`), `app.agent` and `config`; never a surface.
"""
