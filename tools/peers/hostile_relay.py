#!/usr/bin/env python3
"""A hostile Nostr "relay" for bitchat-bridge's tests: loopback only, speaks just enough WebSocket to
send hand-made text frames. Written for these tests (not copied from anywhere).

Usage: venv/bin/python hostile_relay.py --port P --frames FILE [--cert PEM --key PEM]

FILE holds one JSON string per line: the exact text of a frame to send, where every `{SUB}` is
replaced by the subscription id of the client's first REQ. For each connection the relay waits for
that REQ, sends the frames in order, then keeps reading (and ignoring) until the client leaves.
With --cert/--key it serves wss:// instead. Prints 'READY <url>' once listening.
"""
import argparse, asyncio, json, signal, ssl

from websockets.asyncio.server import serve


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--frames", required=True)
    ap.add_argument("--cert")
    ap.add_argument("--key")
    a = ap.parse_args()
    with open(a.frames, encoding="utf-8") as f:
        frames = [json.loads(line) for line in f if line.strip()]

    async def handler(ws):
        sub = None
        async for message in ws:
            try:
                parsed = json.loads(message)
            except ValueError:
                continue
            if isinstance(parsed, list) and len(parsed) >= 2 and parsed[0] == "REQ":
                sub = parsed[1]
                break
        if sub is None:
            return
        for frame in frames:
            await ws.send(frame.replace("{SUB}", sub))
        async for _ in ws:
            pass

    context = None
    if a.cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(a.cert, a.key)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for s in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(s, stop.set)
    # max_size bounds what *we* accept; compression off so frames go out byte for byte.
    async with serve(handler, "127.0.0.1", a.port, ssl=context, max_size=1 << 20, compression=None):
        print("READY", ("wss" if context else "ws") + f"://127.0.0.1:{a.port}", flush=True)
        await stop.wait()


asyncio.run(main())
