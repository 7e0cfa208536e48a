"""`memory forget --user <person>` through the one registry: every form a person is shown as reaches
their key in the admin's workspace, their log entries take a pseudonym, nothing kept is a refusal, and a
failing store is one ⚠️ line."""

from __future__ import annotations

import time
from pathlib import Path

from commands.memory import build_registry
from commands.registry import Caller, CommandRegistry, CommandReply
from commands.transcripts import ChatTranscripts, chat_directory
from memory.rules.visibility import Reader
from memory.stores.contract import MemoryStore
from memory.stores.in_process import InProcessMemoryStore
from memory.stores.sqlite.store import SqliteMemoryStore
from memory.types import AuditQuery, CurationEntry, MemoryCandidate, ReadAudit

TEAM_ADMIN = "slack:T1:UADMIN"
BOB = "user:slack:T1:UBOB"


def caller(user: str = TEAM_ADMIN) -> Caller:
    return Caller(user, "slack:T1:C1", "public", "slack:T1:C1:1.0", "slack")


def in_their_dm(user: str = TEAM_ADMIN) -> Caller:
    """Where the audit is answered: a reply only its asker reads."""
    return Caller(
        user, "slack:T1:D1", "dm", "slack:T1:D1:1.0", "slack", reader=Reader("self", user, "slack:T1:D1")
    )


def registry(store: MemoryStore, transcripts: ChatTranscripts | None = None) -> CommandRegistry:
    return build_registry(
        store=store,
        memory_enabled=True,
        organization="acme",
        admins=[f"user:{TEAM_ADMIN}", "user:cli:local"],
        transcripts=transcripts,
    )


async def run(reg: CommandRegistry, text: str, who: Caller | None = None) -> CommandReply:
    reply = await reg.handle(text, who or caller())
    assert reply is not None
    return reply


async def bobs_store() -> InProcessMemoryStore:
    store = InProcessMemoryStore()
    await store.write(BOB, [MemoryCandidate("fact", "prefers tabs", "slack:T1:D1:1.0", origin="dm")])
    return store


async def test_every_form_slack_shows_bob_as_erases_his_team_qualified_scope() -> None:
    for form in ("UBOB", "<@UBOB>", "<@UBOB|Bob Smith>", "slack:UBOB", "user:slack:UBOB", "slack:T1:UBOB"):
        store = await bobs_store()
        reply = await run(registry(store), f"memory forget --user {form}")
        assert (reply.ok, reply.text) == (True, f"🧹 Erased 1 record of `{BOB}`."), form
        assert await store.list(BOB, 10) == []


async def test_bobs_entries_in_the_org_log_and_the_audit_take_a_pseudonym_the_receipt_counts() -> None:
    store = await bobs_store()
    await store.write("org:acme", [MemoryCandidate("fact", "deploys on fridays", "slack:T1:C1:1.0")])
    await store.record_curation(CurationEntry("mem:org:acme:1", "org:acme", "remembered", BOB, time.time()))
    await store.record_read(
        ReadAudit("run-1", "slack:T1:C1:1.0", "slack:T1:UBOB", ("org:acme",), (), time.time())
    )

    reply = await run(registry(store), "memory forget --user <@UBOB>")

    assert reply.text == f"🧹 Erased 1 record of `{BOB}` (2 log entries now name a pseudonym instead)."
    [entry] = await store.curation_log("org:acme", "mem:org:acme:1", 10)
    [read] = await store.read_audit(AuditQuery(run_id="run-1"))
    assert entry.actor == f"user:{read.asker}" and entry.actor.startswith("user:erased:")
    assert "UBOB" not in entry.actor and (read.asker or "") not in reply.text  # never shown


async def test_a_name_nobody_is_known_by_is_refused_and_a_malformed_one_names_the_forms() -> None:
    reg = registry(await bobs_store())
    unknown = await run(reg, "memory forget --user UNOBODY")
    assert not unknown.ok and unknown.text.startswith("🚫 Nobody is known as `user:slack:T1:UNOBODY`")
    malformed = await run(reg, "memory forget --user @bob")
    assert not malformed.ok and malformed.text.startswith("🚫 `@bob` names no person: use one of")


async def test_a_non_admin_may_erase_nobody() -> None:
    store = await bobs_store()
    refused = await run(registry(store), "memory forget --user <@UBOB>", caller("slack:T1:UEVE"))
    assert refused.text.startswith("🚫 Only admins") and len(await store.list(BOB, 10)) == 1


async def test_the_terminal_persons_erasure_deletes_their_chat_threads(tmp_path: Path) -> None:
    threads = chat_directory(tmp_path)
    threads.mkdir()
    for name in ("a.json", "b.json", ".b.json.tmp"):
        (threads / name).write_text('{"turns": []}')
    reg = registry(InProcessMemoryStore(), ChatTranscripts(tmp_path))
    reply = await run(reg, "memory forget --user user:cli:local")
    assert reply.text == "🧹 Erased 0 records of `user:cli:local` (2 chat transcripts deleted)."
    assert list(threads.iterdir()) == []
    bob = await run(reg, "memory forget --user UBOB")
    assert bob.text.startswith("🚫 Nobody is known")  # another person's erasure never touches them


async def test_a_failing_store_is_one_warning_line_naming_the_step(tmp_path: Path) -> None:
    store = SqliteMemoryStore(tmp_path / "memory")
    await store.aclose()
    reply = await run(registry(store), "memory forget --user <@UBOB>")
    assert not reply.ok and reply.text.startswith(
        f"⚠️ Erasing `{BOB}` stopped: the records could not be erased"
    )
    assert len(reply.text.splitlines()) == 1


async def test_memory_audit_takes_a_person_in_the_same_forms() -> None:
    store = InProcessMemoryStore()
    await store.record_read(
        ReadAudit("run-1", "slack:T1:C1:1.0", "slack:T1:UBOB", ("org:acme",), (), time.time())
    )
    for form in ("<@UBOB>", "UBOB", "user:slack:T1:UBOB"):
        reply = await run(registry(store), f"memory audit --user {form}", in_their_dm())
        assert "run-1" in reply.text, (form, reply.text)
