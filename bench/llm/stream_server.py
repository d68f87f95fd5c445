# A model-free OpenAI-compatible streaming server on the Python standard library alone (asyncio),
# for machines without PyPI (bench/llm/device-cpu.sh): POST /v1/completions and
# /v1/chat/completions stream max_tokens chunks ITL_MS apart, then the usage and [DONE]; GET
# /v1/models names one model. Each answer ends with the connection (HTTP/1.1, no length).
#   python3 stream_server.py PORT ITL_MS
import asyncio
import json
import sys

PORT, ITL = int(sys.argv[1]), float(sys.argv[2]) / 1000


async def handle(reader, writer):
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, path = lines[0].split(" ")[:2]
        length = next((int(l.split(":", 1)[1]) for l in lines if l.lower().startswith("content-length:")), 0)
        body = json.loads(await reader.readexactly(length)) if length else {}
        if method == "GET" and path.endswith("/v1/models"):
            data = json.dumps({"object": "list", "data": [{"id": "stream", "object": "model"}]}).encode()
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n"
                         b"content-length: %d\r\n\r\n%s" % (len(data), data))
            return
        chat = "messages" in body
        n = int(body.get("max_tokens", 16))
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n")
        for i in range(n):
            choice = {"index": 0, "delta": {"content": f"t{i} "}} if chat else {"index": 0, "text": f"t{i} "}
            writer.write(b"data: " + json.dumps({"id": "c", "object": "chunk", "model": "stream", "choices": [choice]}).encode() + b"\n\n")
            await writer.drain()
            await asyncio.sleep(ITL)
        usage = {"prompt_tokens": 8, "completion_tokens": n, "total_tokens": 8 + n}
        writer.write(b"data: " + json.dumps({"id": "c", "choices": [], "usage": usage}).encode() + b"\n\ndata: [DONE]\n\n")
        await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, ValueError):
        pass
    finally:
        writer.close()


async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", PORT, backlog=4096)
    print(json.dumps({"port": PORT}), flush=True)
    async with server:
        await server.serve_forever()


asyncio.run(main())
