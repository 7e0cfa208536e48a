"""OpenAI chat completions (and any OpenAI-compatible server) behind `complete(request)`."""

from __future__ import annotations

import json
from typing import Any, Literal

import openai

from app.agent.providers.base import (
    Completion,
    CompletionRequest,
    Message,
    ProviderError,
    ToolCall,
    ToolSpec,
    Usage,
)

NAME = "openai"
# Local OpenAI-compatible servers ignore the key, but the SDK refuses to start without one.
LOCAL_PLACEHOLDER_KEY = "not-needed"

MaxTokensField = Literal["max_completion_tokens", "max_tokens"]


class OpenAIProvider:
    """`base_url` points it at any OpenAI-compatible server; unset leaves `OPENAI_BASE_URL` to the SDK.

    `max_tokens_field` is the request field carrying the output budget: OpenAI's own API wants
    `max_completion_tokens`; some older compatible servers only know `max_tokens`.
    """

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float | None = None,
        max_retries: int | None = None,
        max_tokens_field: MaxTokensField = "max_completion_tokens",
        keyless: bool = False,
        name: str = NAME,
    ) -> None:
        options: dict[str, Any] = {}
        if api_key is not None:
            options["api_key"] = api_key
        elif keyless:
            options["api_key"] = LOCAL_PLACEHOLDER_KEY
        if base_url is not None:
            options["base_url"] = base_url
        if timeout is not None:
            options["timeout"] = timeout
        if max_retries is not None:
            options["max_retries"] = max_retries
        self.name = name
        self._max_tokens_field = max_tokens_field
        try:
            self._client = openai.AsyncOpenAI(**options)
        except openai.OpenAIError as error:
            raise ProviderError(f"{name}: {error}", provider=name) from error

    async def complete(self, request: CompletionRequest) -> Completion:
        messages: list[dict[str, Any]] = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        for message in request.messages:
            messages.extend(_messages(message))
        params: dict[str, Any] = {
            "model": request.model,
            "messages": messages,
            self._max_tokens_field: request.max_tokens,
        }
        if request.tools:
            params["tools"] = [_tool(t) for t in request.tools]
        try:
            response = await self._client.chat.completions.create(**params)
        except openai.APIStatusError as error:
            raise ProviderError(
                f"{self.name} returned {error.status_code}: {_error_message(error)}",
                status=error.status_code,
                provider=self.name,
            ) from error
        except openai.APITimeoutError as error:
            raise ProviderError(f"{self.name} timed out", provider=self.name) from error
        except openai.APIConnectionError as error:
            raise ProviderError(f"{self.name} is unreachable", provider=self.name) from error
        except openai.OpenAIError as error:
            raise ProviderError(f"{self.name}: {error}", provider=self.name) from error
        return _completion(response, self.name)

    async def aclose(self) -> None:
        await self._client.close()


def _tool(tool: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": dict(tool.input_schema),
        },
    }


def _messages(message: Message) -> list[dict[str, Any]]:
    if message.role == "assistant":
        out: dict[str, Any] = {"role": "assistant", "content": message.text or None}
        if message.tool_calls:
            out["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": json.dumps(dict(call.arguments))},
                }
                for call in message.tool_calls
            ]
        elif not message.text:
            out["content"] = ""
        return [out]
    results = [
        {"role": "tool", "tool_call_id": result.tool_call_id, "content": result.content}
        for result in message.tool_results
    ]
    if message.text or not results:
        results.append({"role": "user", "content": message.text})
    return results


def _completion(response: Any, name: str) -> Completion:
    if not response.choices:
        raise ProviderError(f"{name} returned no choices", provider=name)
    choice = response.choices[0]
    calls: list[ToolCall] = []
    for call in choice.message.tool_calls or ():
        function = getattr(call, "function", None)
        if function is None:  # a non-function (custom) tool call: nothing of ours asked for it
            continue
        calls.append(ToolCall(id=call.id, name=function.name, arguments=_arguments(function.arguments)))
    usage = response.usage
    return Completion(
        text=choice.message.content or "",
        tool_calls=tuple(calls),
        usage=Usage(usage.prompt_tokens or 0, usage.completion_tokens or 0) if usage else Usage(),
        stop_reason=choice.finish_reason,
    )


def _arguments(raw: str) -> dict[str, Any]:
    """Malformed arguments reach the tool as-is, so the tool's error tells the model what went wrong."""
    try:
        parsed = json.loads(raw) if raw else {}
    except ValueError:
        return {"_unparsed_arguments": raw}
    return parsed if isinstance(parsed, dict) else {"_unparsed_arguments": raw}


def _error_message(error: openai.APIStatusError) -> str:
    body = error.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return str(inner["message"])
    return error.message
