"""Every model call under one span and in the model metrics, whichever provider makes it.

The registry wraps each provider it builds, so the agent loop and the reflection extractor are both
covered. The span carries the provider, the model and the token counts, never the prompt or the reply.
"""

from __future__ import annotations

import inspect
import time

from app.agent.providers.base import Completion, CompletionRequest, Provider
from ops.metrics import Metrics
from ops.tracing import SpanKind, span


class ObservedProvider:
    """A provider that traces and measures each `complete` of the one it wraps."""

    def __init__(self, inner: Provider, name: str, metrics: Metrics | None = None) -> None:
        self.inner = inner
        self.name = name
        self._metrics = metrics

    async def complete(self, request: CompletionRequest) -> Completion:
        attributes: dict[str, str | int] = {
            "gen_ai.system": self.name,
            "gen_ai.request.model": request.model,
            "gen_ai.request.max_tokens": request.max_tokens,
            "switchboard.tools": len(request.tools),
        }
        started = time.perf_counter()
        with span("model.call", attributes, kind=SpanKind.CLIENT) as call_span:
            try:
                completion = await self.inner.complete(request)
            finally:
                if self._metrics is not None:
                    elapsed = time.perf_counter() - started
                    self._metrics.model_latency.labels(self.name, request.model).observe(elapsed)
            usage = completion.usage
            call_span.set_attributes(
                {
                    "gen_ai.usage.input_tokens": usage.input_tokens,
                    "gen_ai.usage.output_tokens": usage.output_tokens,
                    "switchboard.tool_calls": len(completion.tool_calls),
                }
            )
            if completion.stop_reason is not None:
                call_span.set_attribute("gen_ai.response.finish_reason", completion.stop_reason)
        if self._metrics is not None:
            tokens = self._metrics.model_tokens
            tokens.labels(self.name, request.model, "input").inc(usage.input_tokens)
            tokens.labels(self.name, request.model, "output").inc(usage.output_tokens)
        return completion

    async def aclose(self) -> None:
        close = getattr(self.inner, "aclose", None)
        if close is not None:
            result = close()
            if inspect.isawaitable(result):
                await result
