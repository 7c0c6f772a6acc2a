#!/usr/bin/env python3
"""A hostile Nostr "relay" for bitchat-bridge's tests: loopback only, speaks just enough WebSocket
(RFC 6455, by hand on asyncio streams, so it can also misbehave below the WebSocket layer) to send
hand-made text frames. Written for these tests (not copied from anywhere).

Usage: venv/bin/python hostile_relay.py --port P [--mode MODE] [--frames FILE] [options]

Modes (what every connection gets):
  frames         (default) wait for the client's first REQ, send the frames of FILE in order, then keep
                 reading (answering pings, ignoring the rest) until the client leaves.
  flood          wait for the first REQ, then send the frames of FILE round and round until --count
                 frames are out, at --rate frames/s (0 = as fast as the socket takes them), then the
                 frames of --then FILE once, then behave as `frames`.
  never-upgrade  accept TCP and read the HTTP request, never answer it (hold until the client leaves).
  silent         complete the upgrade, then never read or write again (no PONG either).
  close-at-once  complete the upgrade, then send a close frame (1000) and close the socket.

FILE holds one JSON string per line: the exact text of a frame, where every `{SUB}` is replaced by the
subscription id of the client's first REQ. With --cert/--key it serves wss:// instead.

Stdout, one line each (tests count them): 'READY <url>' once listening; 'CONNECT <n>' per accepted TCP
connection; 'UPGRADED <n>' per completed handshake; 'FLOODED <n> <frames>' when a flood has been
written; 'GONE <n>' when a connection ends.
"""
import argparse, asyncio, base64, hashlib, json, signal, ssl, struct, sys, time

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
# Hold at most this much unsent flood data before waiting for the socket (bounds the relay's memory).
WRITE_CHUNK = 256 << 10


def say(*parts):
    print(*parts, flush=True)


def frame(payload: bytes, opcode: int = 1) -> bytes:
    """A server frame (unmasked, FIN set)."""
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", 0x80 | opcode, n)
    elif n < 1 << 16:
        head = struct.pack("!BBH", 0x80 | opcode, 126, n)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 127, n)
    return head + payload


async def read_frame(reader):
    """(opcode, payload) of the next client frame; raises IncompleteReadError at the end."""
    b0, b1 = await reader.readexactly(2)
    n = b1 & 0x7F
    if n == 126:
        (n,) = struct.unpack("!H", await reader.readexactly(2))
    elif n == 127:
        (n,) = struct.unpack("!Q", await reader.readexactly(8))
    if n > 1 << 20:
        raise ValueError("client frame too large")
    mask = await reader.readexactly(4) if b1 & 0x80 else b"\0\0\0\0"
    data = bytearray(await reader.readexactly(n))
    for i in range(n):
        data[i] ^= mask[i & 3]
    return b0 & 0x0F, bytes(data)


async def handshake(reader, writer) -> bool:
    request = await reader.readuntil(b"\r\n\r\n")
    key = None
    for line in request.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"sec-websocket-key":
            key = value.strip()
    if key is None:
        return False
    accept = base64.b64encode(hashlib.sha1(key + GUID).digest())
    writer.write(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                 b"Sec-WebSocket-Accept: " + accept + b"\r\n\r\n")
    await writer.drain()
    return True


async def first_request(reader, writer):
    """Reads until the client's first REQ; returns its subscription id (None if the client left)."""
    while True:
        opcode, data = await read_frame(reader)
        if opcode == 8:
            return None
        if opcode == 9:
            writer.write(frame(data, 10))
            continue
        if opcode != 1:
            continue
        try:
            parsed = json.loads(data)
        except ValueError:
            continue
        if isinstance(parsed, list) and len(parsed) >= 2 and parsed[0] == "REQ" and isinstance(parsed[1], str):
            return parsed[1]


async def keep_reading(reader, writer):
    while True:
        opcode, data = await read_frame(reader)
        if opcode == 8:
            writer.write(frame(data[:2], 8))
            return
        if opcode == 9:
            writer.write(frame(data, 10))


async def flood(writer, encoded, count, rate):
    """Writes `count` frames cycling through `encoded`, at `rate` frames/s (0 = unpaced)."""
    sent = 0
    start = time.monotonic()
    while sent < count:
        if rate > 0:
            # Paced in 10 ms steps: as many frames as the schedule allows by now.
            due = min(count, int((time.monotonic() - start) * rate) + 1)
            if due <= sent:
                await asyncio.sleep(0.01)
                continue
        else:
            due = count
        chunk = []
        size = 0
        while sent < due and size < WRITE_CHUNK:
            piece = encoded[sent % len(encoded)]
            chunk.append(piece)
            size += len(piece)
            sent += 1
        writer.write(b"".join(chunk))
        await writer.drain()
    return sent


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--mode", default="frames", choices=["frames", "flood", "never-upgrade", "silent", "close-at-once"])
    ap.add_argument("--frames")
    ap.add_argument("--then", help="flood mode: frames sent once after the flood")
    ap.add_argument("--count", type=int, default=0, help="flood mode: frames to send")
    ap.add_argument("--rate", type=float, default=0, help="flood mode: frames per second, 0 = unpaced")
    ap.add_argument("--cert")
    ap.add_argument("--key")
    a = ap.parse_args()

    def load(path):
        if not path:
            return []
        with open(path, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]

    frames = load(a.frames)
    then = load(a.then)
    if a.mode == "flood" and (not frames or a.count <= 0):
        ap.error("flood needs --frames and --count")
    connections = 0
    held = set()

    async def handler(reader, writer):
        nonlocal connections
        connections += 1
        n = connections
        say("CONNECT", n)
        held.add(writer)
        try:
            if a.mode == "never-upgrade":
                await reader.readuntil(b"\r\n\r\n")
                await reader.read()  # until the client gives up
                return
            if not await handshake(reader, writer):
                return
            say("UPGRADED", n)
            if a.mode == "silent":
                await asyncio.Event().wait()  # never read, never write: pings go unanswered
            if a.mode == "close-at-once":
                writer.write(frame(struct.pack("!H", 1000), 8))
                await writer.drain()
                return
            sub = await first_request(reader, writer)
            if sub is None:
                return
            if a.mode == "flood":
                encoded = [frame(f.replace("{SUB}", sub).encode()) for f in frames]
                sent = await flood(writer, encoded, a.count, a.rate)
                say("FLOODED", n, sent)
                for f in then:
                    writer.write(frame(f.replace("{SUB}", sub).encode()))
            else:
                for f in frames:
                    writer.write(frame(f.replace("{SUB}", sub).encode()))
            await writer.drain()
            await keep_reading(reader, writer)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, ValueError, ssl.SSLError):
            pass
        finally:
            held.discard(writer)
            writer.close()
            say("GONE", n)

    context = None
    if a.cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(a.cert, a.key)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for s in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(s, stop.set)
    server = await asyncio.start_server(handler, "127.0.0.1", a.port, ssl=context, limit=1 << 20)
    say("READY", ("wss" if context else "ws") + f"://127.0.0.1:{a.port}")
    async with server:
        await stop.wait()
        for writer in list(held):
            writer.transport.abort()


asyncio.run(main())
