"""An SSE peer for tests/sse.rs, on sse-starlette (PyPI) and uvicorn: it counts what it streamed.

GET  /events?n=N&gap_ms=G&drop_after=K   N events (ids 0..N-1, named tick, every other one two
     data lines, a comment first, retry on the first); with drop_after, a first connection ends
     after K events and a reconnection resumes after its Last-Event-ID.
POST /v1/chat/completions, /v1/completions   OpenAI-format streams: a role chunk, max_tokens
     content chunks (an empty one after the first, as llama.cpp sends for a partial character),
     a finish chunk, the usage chunk when asked (and the server is not under /nousage), [DONE].
GET  /v1/models   one model.
GET  /stats       what was streamed, and how many of those requests came over HTTP/2 (from how
     many connections): served by hypercorn, the same app speaks HTTP/2 in clear (prior knowledge).
"""

import asyncio
import json
import time

from sse_starlette.sse import EventSourceResponse, ServerSentEvent
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route

STATS = {
    "streams": 0,
    "events": 0,
    "completed": 0,
    "resumed": 0,
    "chat_requests": 0,
    "chat_tokens": 0,
    "usage_chunks": 0,
    "models": [],
    "requests": 0,
    "http2_requests": 0,
    "http2_connections": 0,
}
H2_CLIENTS = set()


def seen(request):
    """Counts a request (a stream, a completion, the models), and whether it came over HTTP/2
    (on which connection)."""
    STATS["requests"] += 1
    if request.scope.get("http_version") == "2":
        STATS["http2_requests"] += 1
        H2_CLIENTS.add(tuple(request.scope.get("client") or ()))
        STATS["http2_connections"] = len(H2_CLIENTS)


async def events(request):
    q = request.query_params
    n, gap = int(q.get("n", "5")), int(q.get("gap_ms", "5")) / 1000
    drop_after = int(q.get("drop_after", "0"))
    seen(request)
    last = request.headers.get("last-event-id")
    start = int(last) + 1 if last is not None and last.isdigit() else 0
    if last is not None:
        STATS["resumed"] += 1

    async def gen():
        STATS["streams"] += 1
        yield ServerSentEvent(comment="hello from sse-starlette")
        sent = 0
        for i in range(start, n):
            if drop_after and last is None and sent == drop_after:
                return
            data = f"line1 of {i}\nline2 of {i}" if i % 2 else json.dumps({"i": i, "status": "done" if i == n - 1 else "running"})
            yield ServerSentEvent(data=data, event="tick", id=str(i), retry=200 if i == 0 else None)
            STATS["events"] += 1
            sent += 1
            await asyncio.sleep(gap)
        STATS["completed"] += 1

    return EventSourceResponse(gen(), ping=600)


def completions(usage_allowed):
    async def handler(request):
        body = await request.json()
        seen(request)
        chat = "messages" in body
        model = body.get("model", "")
        STATS["models"].append(model)
        n = int(body.get("max_tokens", 8))
        want_usage = usage_allowed and body.get("stream_options", {}).get("include_usage")
        STATS["chat_requests"] += 1
        created = int(time.time())

        def chunk(choice, usage=None):
            c = {"id": "cmpl-1", "object": "chat.completion.chunk" if chat else "text_completion",
                 "created": created, "model": model, "choices": [choice] if choice is not None else []}
            if usage is not None:
                c["usage"] = usage
            return ServerSentEvent(data=json.dumps(c))

        def text(t, finish=None):
            if chat:
                delta = {"content": t} if t is not None else {}
                return {"index": 0, "delta": delta, "finish_reason": finish}
            return {"index": 0, "text": t or "", "finish_reason": finish}

        async def gen():
            if chat:
                yield chunk({"index": 0, "delta": {"role": "assistant"}, "finish_reason": None})
            for i in range(n):
                await asyncio.sleep(0.004)
                yield chunk(text(f"tok{i} "))
                STATS["chat_tokens"] += 1
                if i == 0:
                    yield chunk(text(""))
            yield chunk(text(None, "length"))
            if want_usage:
                STATS["usage_chunks"] += 1
                yield chunk(None, {"prompt_tokens": 5, "completion_tokens": n, "total_tokens": 5 + n})
            yield ServerSentEvent(data="[DONE]")

        return EventSourceResponse(gen(), ping=600)

    return handler


async def models(request):
    seen(request)
    return JSONResponse({"object": "list", "data": [{"id": "peer-model", "object": "model"}]})


async def stats(request):
    return JSONResponse(STATS)


def api(usage_allowed):
    return [
        Route("/v1/chat/completions", completions(usage_allowed), methods=["POST"]),
        Route("/v1/completions", completions(usage_allowed), methods=["POST"]),
        Route("/v1/models", models),
    ]


app = Starlette(
    routes=[
        Route("/events", events),
        Route("/stats", stats),
        Mount("/nousage", routes=api(False)),
        *api(True),
    ]
)
