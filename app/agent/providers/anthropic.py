"""The Anthropic Messages API behind `complete(request)`, on the SDK's AsyncAnthropic client."""

from __future__ import annotations

from typing import Any

import anthropic

from app.agent.providers.base import (
    Completion,
    CompletionRequest,
    Message,
    ProviderError,
    ToolCall,
    ToolSpec,
    Usage,
)

NAME = "anthropic"


class AnthropicProvider:
    """Timeouts and retries are the SDK's own; unset values keep the SDK defaults and env variables.

    `base_url=None` leaves `ANTHROPIC_BASE_URL` (or the SDK default) in charge; `api_key=None` leaves
    `ANTHROPIC_API_KEY` to the SDK.
    """

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float | None = None,
        max_retries: int | None = None,
        name: str = NAME,
    ) -> None:
        options: dict[str, Any] = {}
        if api_key is not None:
            options["api_key"] = api_key
        if base_url is not None:
            options["base_url"] = base_url
        if timeout is not None:
            options["timeout"] = timeout
        if max_retries is not None:
            options["max_retries"] = max_retries
        self.name = name
        self._client = anthropic.AsyncAnthropic(**options)

    async def complete(self, request: CompletionRequest) -> Completion:
        params: dict[str, Any] = {
            "model": request.model,
            "max_tokens": request.max_tokens,
            "messages": [_message(m) for m in request.messages],
        }
        if request.system:
            params["system"] = request.system
        if request.tools:
            params["tools"] = [_tool(t) for t in request.tools]
        try:
            response = await self._client.messages.create(**params)
        except anthropic.APIStatusError as error:
            raise ProviderError(
                f"{self.name} returned {error.status_code}: {_error_message(error)}",
                status=error.status_code,
                provider=self.name,
            ) from error
        except anthropic.APITimeoutError as error:
            raise ProviderError(f"{self.name} timed out", provider=self.name) from error
        except anthropic.APIConnectionError as error:
            raise ProviderError(f"{self.name} is unreachable", provider=self.name) from error
        except anthropic.AnthropicError as error:
            raise ProviderError(f"{self.name}: {error}", provider=self.name) from error
        return _completion(response)

    async def aclose(self) -> None:
        await self._client.close()


def _tool(tool: ToolSpec) -> dict[str, Any]:
    return {"name": tool.name, "description": tool.description, "input_schema": dict(tool.input_schema)}


def _message(message: Message) -> dict[str, Any]:
    if message.role == "assistant":
        if not message.tool_calls:
            return {"role": "assistant", "content": message.text}
        blocks: list[dict[str, Any]] = [{"type": "text", "text": message.text}] if message.text else []
        blocks += [
            {"type": "tool_use", "id": call.id, "name": call.name, "input": dict(call.arguments)}
            for call in message.tool_calls
        ]
        return {"role": "assistant", "content": blocks}
    if not message.tool_results:
        return {"role": "user", "content": message.text}
    results: list[dict[str, Any]] = [
        {
            "type": "tool_result",
            "tool_use_id": result.tool_call_id,
            "content": result.content,
            **({"is_error": True} if result.is_error else {}),
        }
        for result in message.tool_results
    ]
    if message.text:
        results.append({"type": "text", "text": message.text})
    return {"role": "user", "content": results}


def _completion(response: Any) -> Completion:
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in response.content:
        if block.type == "text":
            texts.append(block.text)
        elif block.type == "tool_use":
            calls.append(ToolCall(id=block.id, name=block.name, arguments=dict(block.input or {})))
    usage = Usage(response.usage.input_tokens or 0, response.usage.output_tokens or 0)
    return Completion(
        text="".join(texts), tool_calls=tuple(calls), usage=usage, stop_reason=response.stop_reason
    )


def _error_message(error: anthropic.APIStatusError) -> str:
    body = error.body
    if isinstance(body, dict):
        inner = body.get("error")
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return str(inner["message"])
    return error.message
