"""The app's side of reflection: the post-run step that schedules it, and the provider behind it.

Installed only when memory is enabled (memory off → no step at all: nothing scheduled, no extra model
call). The step runs inside the dispatch, after the reply landed and while the run still holds its
active-run slot, and returns as soon as the reflection is scheduled; the lifecycle drain then waits
for the tracker, so a restart (or the one-shot `switchboard chat`) never drops a distillation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Protocol

import structlog

from app.agent.providers.base import CompletionRequest, Message, Provider
from app.audience import reader_for
from app.dispatch import CompletedRun
from app.policy import Actor, Decision, authorize, reflection_actor
from app.review import PendingSweep
from app.review_digest import ReviewDigest
from memory.reflection import (
    Extract,
    ExtractionRequest,
    ReflectionOutcome,
    ReflectionRun,
    ReflectionTracker,
    schedule_reflection,
    should_reflect,
)
from memory.reflection.distill import held_for_review
from memory.rules.write_gate import WRITE_ACTION, MemoryScopeResource
from memory.stores.contract import MemoryStore
from ops.metrics import Metrics

log = structlog.get_logger("memory")

Authorize = Callable[[Actor, str, MemoryScopeResource], Decision]


class ProviderResolver(Protocol):
    """app.agent.providers.registry.ProviderRegistry: a model ref → its provider and model name."""

    def resolve(self, ref: str) -> tuple[Provider, str]: ...


class PostRunDispatcher(Protocol):
    def add_post_run(self, step: Callable[[CompletedRun], object]) -> None: ...


class WaiterLifecycle(Protocol):
    def add_waiter(self, waiter: Callable[[], Awaitable[object]]) -> None: ...


def provider_extractor(provider: Provider) -> Extract:
    """One `complete` call: the extractor prompt as system, the input as the one user message, no tools."""

    async def extract(request: ExtractionRequest) -> str:
        completion = await provider.complete(
            CompletionRequest(
                model=request.model,
                system=request.system,
                messages=(Message(role="user", text=request.user_text),),
                tools=(),
                max_tokens=request.max_tokens,
            )
        )
        return completion.text

    return extract


class ReflectionHook:
    """The post-run step: gate the run, resolve the extractor model, schedule the tracked reflection."""

    def __init__(
        self,
        *,
        store: MemoryStore,
        providers: ProviderResolver,
        memory_model: str | None,
        tracker: ReflectionTracker | None = None,
        authorize: Authorize = authorize,
        metrics: Metrics | None = None,
        review: PendingSweep | None = None,
        digest: ReviewDigest | None = None,
    ) -> None:
        """`review`: reflection's shared writes wait for an admin, and expire by this sweep;
        `digest`: the admins hear of what waits (under review only)."""
        self.store = store
        self.providers = providers
        self.memory_model = memory_model
        self.tracker = tracker or ReflectionTracker()
        self.authorize = authorize
        self.metrics = metrics
        self.review = review
        self.digest = digest if review is not None else None

    @property
    def pending_reflection_count(self) -> int:
        return self.tracker.pending_reflection_count

    async def drain(self, deadline: float | None = None) -> int:
        """Wait for the pending reflections (see ReflectionTracker.drain)."""
        return await self.tracker.drain(deadline)

    def __call__(self, completed: CompletedRun) -> None:
        """Schedule and return at once — never hand the dispatcher something to await."""
        self.schedule(completed)

    def schedule(self, completed: CompletedRun) -> bool:
        """True when a reflection was scheduled for this run."""
        if not should_reflect(completed.tool_calls, completed.history_turns, completed.agent):
            return False
        if completed.scopes is None:
            log.warning("memory.reflection_skipped", reason="no_scopes", run_id=completed.run_id)
            return False
        # memory.model when set, else the run's own resolved ref — never a literal (docs/architecture.md,
        # invariant 5).
        ref = self.memory_model or completed.model_ref
        try:
            provider, model = self.providers.resolve(ref)
        except (ValueError, LookupError) as error:
            log.warning(
                "memory.reflection_skipped",
                reason="model_ref_invalid",
                model_ref=ref,
                error=type(error).__name__,
                run_id=completed.run_id,
            )
            return False
        message = completed.message
        run = ReflectionRun(
            thread_key=message.thread_key,
            scopes=completed.scopes,
            query=completed.request_text,
            request=completed.request_text,
            answer=completed.answer,
            history=message.history,
            run_id=completed.run_id,
            origin_visibility=message.channel_visibility,
            origin_conversation=message.channel_id,
            reader=completed.reader or reader_for(message),
            source_messages=message.source_messages,
            shown_labels=completed.memory_labels,
            observed_at=completed.observed_at,
        )
        task = schedule_reflection(
            self.tracker,
            run,
            store=self.store,
            extract=provider_extractor(provider),
            model=model,
            gate=partial(self.authorize, reflection_actor(completed.scopes), WRITE_ACTION),
            review_shared=self.review is not None,
        )
        if self.metrics is not None:
            task.add_done_callback(partial(count_reflection, self.metrics))
        if self.digest is not None:  # after the reflection, in the tracked set a shutdown drains
            self.tracker.track(asyncio.create_task(self._tell_admins(task), name="memory:review-digest"))
        if self.review is not None and self.review.due():  # drained on shutdown like a reflection
            self.tracker.track(asyncio.create_task(self.review.sweep(), name="memory:pending-expiry"))
        return True

    async def _tell_admins(self, reflection: asyncio.Task[ReflectionOutcome | None]) -> None:
        """Once the reflection settled: if it queued a record for review, the admins' digest."""
        await asyncio.wait({reflection})  # never cancels the reflection if this task is cancelled
        outcome = None if reflection.cancelled() or reflection.exception() else reflection.result()
        if outcome is None or self.digest is None:
            return
        if any(held_for_review(key) and result.inserted for key, result in outcome.writes):
            await self.digest.queued()


def count_reflection(metrics: Metrics, task: asyncio.Task[ReflectionOutcome | None]) -> None:
    """A settled reflection into the metrics: its outcome, what it wrote, what the gate denied."""
    outcome = None if task.cancelled() or task.exception() is not None else task.result()
    metrics.reflection_outcomes.labels(outcome.outcome if outcome is not None else "failed").inc()
    if outcome is None:
        return
    for _, result in outcome.writes:
        for name in ("inserted", "deduped", "superseded"):
            metrics.memory_writes.labels(name).inc(getattr(result, name))
        metrics.memory_evictions.inc(result.evicted)
    denied = sum(1 for item in outcome.routed if item.scope_key is None)
    if denied:
        metrics.memory_denials.labels("write_gate").inc(denied)


def install_reflection(
    dispatcher: PostRunDispatcher,
    lifecycle: WaiterLifecycle | None,
    *,
    store: MemoryStore,
    providers: ProviderResolver,
    memory_model: str | None,
    authorize: Authorize = authorize,
    metrics: Metrics | None = None,
    review: PendingSweep | None = None,
    digest: ReviewDigest | None = None,
) -> ReflectionHook:
    """Register the reflection step on the dispatcher and its drain on the lifecycle."""
    hook = ReflectionHook(
        store=store,
        providers=providers,
        memory_model=memory_model,
        authorize=authorize,
        metrics=metrics,
        review=review,
        digest=digest,
    )
    dispatcher.add_post_run(hook)
    if lifecycle is not None:
        lifecycle.add_waiter(hook.drain)
    return hook
