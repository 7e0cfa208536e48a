"""The memory service's `/metrics`: Prometheus text behind its own token, counters that move, and no
label that carries what a client sent."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families
from starlette.applications import Starlette

from memory.service.app import create_app
from memory.stores.in_process import InProcessMemoryStore
from ops.metrics import Metrics
from tests.memory.service_support import AUTH, asgi_client, fact

METRICS_TOKEN = "test-metrics-token-91c2"
SCRAPE = {"Authorization": f"Bearer {METRICS_TOKEN}"}
SCOPE = "org:acme"


@pytest.fixture
def app() -> Starlette:
    return create_app(
        InProcessMemoryStore(cap=2),
        AUTH["Authorization"].split()[1],
        metrics=Metrics(),
        metrics_token=METRICS_TOKEN,
    )


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


async def test_a_scrape_after_a_few_requests_shows_the_counters_moving(app: Starlette) -> None:
    async with asgi_client(app, AUTH) as client:
        first = samples((await client.get("/metrics", headers=SCRAPE)).text)
        written = [fact(f"the deploy runs on {day}") for day in ("monday", "tuesday", "friday")]
        await client.post("/write", json={"scopeKey": SCOPE, "records": written})
        await client.post("/retrieve", json={"scopeKey": SCOPE, "query": "deploy", "limit": 8})
        await client.post(
            "/retrieve",
            json={"scopeKey": SCOPE, "query": "deploy", "limit": 8},
            headers={"Authorization": "Bearer wrong"},
        )
        await client.post("/nope", json={})
        after = samples((await client.get("/metrics", headers=SCRAPE)).text)

    def moved(name: str, **labels: str) -> float:
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0.0) - first.get(key, 0.0)

    requests = "switchboard_http_requests_total"
    assert moved(requests, server="memory", route="/write", status="200") == 1
    assert moved(requests, server="memory", route="/retrieve", status="200") == 1
    assert moved(requests, server="memory", route="/retrieve", status="401") == 1
    assert moved(requests, server="memory", route="other", status="404") == 1
    assert moved("switchboard_http_request_duration_seconds_count", server="memory", route="/retrieve") == 2
    assert moved("switchboard_memory_writes_total", result="inserted") == 3
    assert moved("switchboard_memory_evictions_total") == 1  # cap 2, three inserted
    assert moved("switchboard_memory_reads_total") == 1
    assert moved("switchboard_memory_records_read_total") == 2
    assert moved("switchboard_memory_denials_total", reason="unauthorized") == 1


async def test_metrics_need_their_own_token_not_the_data_token(app: Starlette) -> None:
    async with asgi_client(app) as client:
        anonymous = await client.get("/metrics")
        with_data_token = await client.get("/metrics", headers=AUTH)
        scraped = await client.get("/metrics", headers=SCRAPE)
    assert (anonymous.status_code, with_data_token.status_code, scraped.status_code) == (401, 401, 200)
    assert scraped.headers["content-type"].startswith("text/plain")


async def test_without_a_metrics_token_nobody_may_scrape() -> None:
    app = create_app(InProcessMemoryStore(cap=10), AUTH["Authorization"].split()[1])
    async with asgi_client(app) as client:
        reply = await client.get("/metrics", headers={"Authorization": "Bearer "})
    assert reply.status_code == 401


async def test_no_label_carries_what_a_client_sent(app: Starlette) -> None:
    async with asgi_client(app, AUTH) as client:
        secret = "zebra-quokka-secret"
        await client.post("/write", json={"scopeKey": f"user:slack:{secret}", "records": [fact(secret)]})
        await client.post("/retrieve", json={"scopeKey": SCOPE, "query": secret, "limit": 8})
        await client.post(f"/{secret}", json={})
        scraped = (await client.get("/metrics", headers=SCRAPE)).text
    assert secret not in scraped
