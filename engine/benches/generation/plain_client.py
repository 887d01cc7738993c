"""The plain script an ML engineer would write: a fixed number of requests in flight
(asyncio + aiohttp), each prompt sent once, completions kept in memory. The benchmark's baseline
against a real vLLM server.

    python plain_client.py URL MODEL PROMPTS_JSON CONCURRENCY MAX_TOKENS [--stream [--token-ids] [--stream-interval N]] [--timeout S]

`--token-ids` asks for the token ids as Draft Studio does (`return_token_ids`), so the request
is the engine's own and what the server spends on it is told apart from what the client spends.

Prints one JSON object: answered, lost, completion tokens, seconds (first send to last answer),
and busy seconds (the requests' durations summed: over seconds, the requests in flight on
average).
"""

import argparse
import asyncio
import json
import time

import aiohttp


async def one(session, url, body, stream, timeout):
    try:
        async with session.post(url, json=body, timeout=aiohttp.ClientTimeout(total=timeout)) as response:
            if response.status != 200:
                await response.read()
                return None
            if not stream:
                data = await response.json()
                return data["usage"]["completion_tokens"]
            tokens = None
            async for line in response.content:
                line = line.strip()
                if not line.startswith(b"data: ") or line == b"data: [DONE]":
                    continue
                chunk = json.loads(line[6:])
                if chunk.get("usage"):
                    tokens = chunk["usage"]["completion_tokens"]
            return tokens
    except (aiohttp.ClientError, asyncio.TimeoutError):
        return None


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("model")
    parser.add_argument("prompts")
    parser.add_argument("concurrency", type=int)
    parser.add_argument("max_tokens", type=int)
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--token-ids", action="store_true")
    parser.add_argument("--stream-interval", type=int, default=16)
    parser.add_argument("--timeout", type=float, default=3600.0)
    args = parser.parse_args()
    prompts = json.load(open(args.prompts))
    url = args.url.rstrip("/") + "/v1/chat/completions"
    slots = asyncio.Semaphore(args.concurrency)
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:

        busy = 0.0

        async def guarded(prompt):
            nonlocal busy
            async with slots:
                body = {
                    "model": args.model,
                    "messages": [{"role": "user", "content": prompt}],
                    "max_tokens": args.max_tokens,
                }
                if args.stream:
                    body.update(stream=True, stream_options={"include_usage": True}, stream_interval=args.stream_interval)
                if args.token_ids:
                    body.update(return_token_ids=True)
                sent = time.monotonic()
                try:
                    return await one(session, url, body, args.stream, args.timeout)
                finally:
                    busy += time.monotonic() - sent

        start = time.monotonic()
        results = await asyncio.gather(*(guarded(p) for p in prompts))
        seconds = time.monotonic() - start
    answered = [r for r in results if r is not None]
    print(json.dumps({
        "answered": len(answered),
        "lost": len(results) - len(answered),
        "tokens": sum(answered),
        "seconds": seconds,
        "busy_seconds": busy,
    }))


asyncio.run(main())
