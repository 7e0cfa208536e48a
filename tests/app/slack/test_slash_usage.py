"""The `/memory` slash command's usage is the command registry's: it names every command there is."""

from __future__ import annotations

from commands.memory import build_registry
from memory.stores.in_process import InProcessMemoryStore
from tests.app.slack.harness import RecordingDispatcher, running_bot
from tests.fakes.slack_api import FakeSlackApi


async def test_the_slash_commands_usage_names_every_verb_the_registry_has(slack_api: FakeSlackApi) -> None:
    slack_api.add_conversation("C1", "public")
    registry = build_registry(
        store=InProcessMemoryStore(), memory_enabled=True, organization="acme", admins=[]
    )
    verbs = sorted({command.words[1] for command in registry.commands})
    async with running_bot(slack_api, RecordingDispatcher(), registry=registry) as bot:
        # Prose, not a command: the registry hands it back (None) and the slash command shows its usage.
        await bot.slack.slash(
            text="is great", user_id="U1", channel_id="C1", response_url=slack_api.response_url()
        )
        await bot.settle()

    text = "\n".join(response["text"] for response in slack_api.responses)
    assert {"list", "forget", "why", "audit"} <= set(verbs)
    assert [verb for verb in verbs if f"memory {verb}" not in text] == []
    assert "--user" in text  # `memory forget --user`, which the old hand-written usage lacked
