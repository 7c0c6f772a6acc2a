#!/usr/bin/env python3
"""A late-joining bitchat phone, modelled on iOS from the specs alone (written for issue 17's tests).

Independent of the bridge's Swift code: framing and signatures from MESH-WIRE §2 and §4.3, the board
payload from BOARD.md §3-§4, REQUEST_SYNC and the GCS filter from BOARD.md §9.1-§9.3, the phone's side of
a sync (TTL-0 signed request, RSR acceptance) from BOARD.md §8-§9 and MESH-WIRE §7.4. Loopback-free: it
only reads and writes files named on the command line and prints JSON.

  generate --seed N --now MS --messages K --posts J --out FILE
      Phones that were there first: K public messages (v1, signed, iOS form) from 5 senders over the last
      hour and J board posts (mesh and geohash, urgent or not) from 4 authors, the outer packet signed by
      the author's device key (iOS, BOARD.md §2). Writes one JSON object per line: kind, frame (hex),
      signingKey (hex), id (packet ID hex).
  request --seed N --now MS --types union|messages|board --to PEERHEX --holds FILE|- --out FILE
      The late phone's REQUEST_SYNC as iOS builds it (§9.2: P 7, 400 bytes, capacity, since) listing the
      packets in --holds (a generate file; '-' = nothing). Writes JSON: frame, signingKey, sender, p, m,
      values (the sorted GCS set), since, heldIDs.
  receive --request FILE --originals FILE --replies FILE
      Takes the bridge's reply frames (one hex per line) as the phone would: each must decode, be TTL 0 and
      RSR (else iOS drops it as older than 2 min), verify (messages: outer signature under the sender's key;
      board: the inner signature under the inner key), and be byte-identical to what was first sent except
      TTL and RSR. Checks every original the phone lacked and its filter does not cover arrives exactly
      once, and nothing it held. Prints {"ok": …, "errors": […], …}; exit 1 when not ok.
  live-post --seed N --hub PORT --geohash GH --text T [--lifetime MS] --out FILE
      A phone on the hub posts one board post (outer packet signed by its device key, TTL 7) once a bridge
      announced itself; writes and prints JSON: frame, payload, postID, signingKey, createdAt, expiresAt.
  live-delete --seed N --hub PORT --post FILE --out FILE
      The same author (same --seed) sends the tombstone for the post in FILE.
  listen --seed N --hub PORT --seconds S --out FILE
      A phone that records every 0x23 packet it hears, one JSON line each (ttl, ts, sender, rsr, payload,
      innerValid), flushed as they come.
"""
import hashlib
import json
import random
import struct
import sys
import zlib

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

# ---------------------------------------------------------------- framing (MESH-WIRE §2)

FLAG_RECIPIENT, FLAG_SIGNATURE, FLAG_COMPRESSED, FLAG_ROUTE, FLAG_RSR = 0x01, 0x02, 0x04, 0x08, 0x10


def pkcs7(frame):
    """§2.6: the smallest of 256/512/1024/2048 that is >= len + 16; pad 1..255 bytes, each equal to the count."""
    for bucket in (256, 512, 1024, 2048):
        if bucket >= len(frame) + 16:
            pad = bucket - len(frame)
            return frame + bytes([pad]) * pad if 1 <= pad <= 255 else frame
    return frame


def deflate_raw(data):
    c = zlib.compressobj(5, zlib.DEFLATED, -15, 8, zlib.Z_DEFAULT_STRATEGY)
    return c.compress(data) + c.flush()


def maybe_compress(payload):
    """§2.5: >= 100 bytes, < 90 % distinct byte values, deflate strictly shorter."""
    if len(payload) < 100 or len(payload) > 0xFFFF:
        return None
    if len(set(payload)) * 10 >= min(len(payload), 256) * 9:
        return None
    body = deflate_raw(payload)
    return body if 0 < len(body) < len(payload) else None


def encode(p, compressed_body="auto"):
    """v1 frame; p = dict(type, ttl, ts, flags extras: rsr, sender, recipient, payload, signature)."""
    flags = 0
    if p.get("recipient") is not None:
        flags |= FLAG_RECIPIENT
    if p.get("signature") is not None:
        flags |= FLAG_SIGNATURE
    if p.get("rsr"):
        flags |= FLAG_RSR
    body = p.get("body") if compressed_body == "auto" else compressed_body
    if compressed_body == "auto" and body is None:
        body = maybe_compress(p["payload"])
    if body is not None:
        flags |= FLAG_COMPRESSED
        region = struct.pack(">H", len(p["payload"])) + body
    else:
        region = p["payload"]
    out = struct.pack(">BBBQBH", 1, p["type"], p["ttl"], p["ts"], flags, len(region)) + p["sender"]
    if p.get("recipient") is not None:
        out += p["recipient"]
    out += region
    if p.get("signature") is not None:
        out += p["signature"]
    return out


def decode(frame):
    if len(frame) < 22 or frame[0] not in (1, 2):
        raise ValueError("short or bad version")
    v2 = frame[0] == 2
    ptype, ttl, ts, flags = frame[1], frame[2], struct.unpack(">Q", frame[3:11])[0], frame[11]
    size = 4 if v2 else 2
    length = int.from_bytes(frame[12:12 + size], "big")
    off = 12 + size
    sender = frame[off:off + 8]
    off += 8
    recipient = None
    if flags & FLAG_RECIPIENT:
        recipient = frame[off:off + 8]
        off += 8
    if v2 and flags & FLAG_ROUTE:
        off += 1 + 8 * frame[off]
    region = frame[off:off + length]
    if len(region) != length:
        raise ValueError("payload truncated")
    off += length
    body = None
    if flags & FLAG_COMPRESSED:
        original = int.from_bytes(region[:size], "big")
        body = region[size:]
        payload = zlib.decompressobj(-15).decompress(body)
        if len(payload) != original:
            raise ValueError("inflate size")
    else:
        payload = region
    signature = None
    if flags & FLAG_SIGNATURE:
        signature = frame[off:off + 64]
        if len(signature) != 64:
            raise ValueError("signature truncated")
    return dict(type=ptype, ttl=ttl, ts=ts, rsr=bool(flags & FLAG_RSR), sender=sender, recipient=recipient,
                payload=payload, signature=signature, body=body, flags=flags)


def preimage(p, body):
    """§4.3: TTL 0, no signature, RSR clear, the payload as compressed on the wire (or not), padded."""
    q = dict(p, ttl=0, signature=None, rsr=False)
    return pkcs7(encode(q, compressed_body=body))


def verify_outer(p, key):
    pub = Ed25519PublicKey.from_public_bytes(key)
    for body in ([p["body"]] if p["body"] is not None else []) + [maybe_compress(p["payload"]), None]:
        try:
            pub.verify(p["signature"], preimage(p, body))
            return True
        except Exception:
            continue
    return False


def packet_id(p):
    """MESH-WIRE §8.2: SHA-256(type ‖ sender ‖ ts u64 BE ‖ decoded payload)[0..16]."""
    return hashlib.sha256(bytes([p["type"]]) + p["sender"] + struct.pack(">Q", p["ts"]) + p["payload"]).digest()[:16]


# ---------------------------------------------------------------- board (BOARD.md §3-§4)

def tlv16(t, v):
    return bytes([t]) + struct.pack(">H", len(v)) + v


def board_post(key, post_id, geohash, content, nick, created, expires, flags):
    pub = key.public_key().public_bytes_raw()
    pre = bytes([16]) + b"bitchat-board-v1" + post_id
    for s in (geohash, content):
        pre += struct.pack(">H", len(s)) + s
    pre += pub + struct.pack(">H", len(nick)) + nick + struct.pack(">QQB", created, expires, flags)
    sig = key.sign(pre)
    return (tlv16(1, b"\x01") + tlv16(2, post_id) + tlv16(3, geohash) + tlv16(4, content) + tlv16(5, pub)
            + tlv16(6, nick) + tlv16(7, struct.pack(">Q", created)) + tlv16(8, struct.pack(">Q", expires))
            + tlv16(9, bytes([flags])) + tlv16(10, sig))


def board_verify(payload):
    """Decodes (later TLV wins) and checks the inner signature under the inner key (§4)."""
    f, off = {}, 0
    while off + 3 <= len(payload):
        t, n = payload[off], int.from_bytes(payload[off + 1:off + 3], "big")
        f[t] = payload[off + 3:off + 3 + n]
        off += 3 + n
    pub = Ed25519PublicKey.from_public_bytes(f[5])
    if f[1] == b"\x01":
        pre = bytes([16]) + b"bitchat-board-v1" + f[2]
        for t in (3, 4):
            pre += struct.pack(">H", len(f[t])) + f[t]
        pre += f[5] + struct.pack(">H", len(f[6])) + f[6] + f[7] + f[8] + f[9]
    else:
        pre = bytes([20]) + b"bitchat-board-del-v1" + f[2] + f[11]
    try:
        pub.verify(f[10], pre)
        return True
    except Exception:
        return False


# ---------------------------------------------------------------- REQUEST_SYNC and GCS (BOARD.md §9)

TYPE_BITS = {0x01: 0, 0x02: 1, 0x20: 5, 0x22: 7, 0x23: 8, 0x24: 9, 0x25: 10}
UNION = {0x01, 0x02, 0x20, 0x22, 0x25, 0x24, 0x23}  # a3 07


def h64(pid):
    return int.from_bytes(hashlib.sha256(pid).digest()[:8], "big") & 0x7FFFFFFFFFFFFFFF


def golomb(values, p):
    bits = []
    prev = 0
    for v in values:
        x = v - prev - 1
        prev = v
        bits += [1] * (x >> p) + [0] + [(x >> i) & 1 for i in range(p - 1, -1, -1)]
    while len(bits) % 8:
        bits.append(0)
    return bytes(int("".join(map(str, bits[i:i + 8])), 2) for i in range(0, len(bits), 8))


def gcs_decode(p, m, data):
    """§9.3: empty for P outside 1..32 or M <= 1; stop at the end of data or when acc >= M."""
    if not 1 <= p <= 32 or m <= 1:
        return []
    bits = [(b >> (7 - i)) & 1 for b in data for i in range(8)]
    pos, acc, out = 0, 0, []
    while True:
        q = 0
        while pos < len(bits) and bits[pos] == 1:
            q, pos = q + 1, pos + 1
        if pos >= len(bits):
            break
        pos += 1
        if pos + p > len(bits):
            break
        r = int("".join(map(str, bits[pos:pos + p])), 2) if p else 0
        pos += p
        acc += (q << p) + r + 1
        if acc >= m:
            break
        out.append(acc)
    return out


def bucket(pid, m):
    if m <= 1:
        return 0
    v = h64(pid) % m
    return v or 1


def build_request(types, held):
    """iOS buildGcsPayload: newest first, N = min(count, 355, cap), M = N·2^7, since when capped."""
    p = 7
    cands = sorted([h for h in held if h["ptype"] in types], key=lambda h: -h["ts"])
    cap = 200 if types == {0x23} else 1000
    n = min(len(cands), (8 * 400) // (p + 2), cap)
    bits = sum(1 << TYPE_BITS[t] for t in types)
    tbytes = bits.to_bytes(8, "little").rstrip(b"\x00")
    if n == 0:
        return p, 1, [], None, tlv16(1, bytes([p])) + tlv16(2, struct.pack(">I", 1)) + tlv16(3, b"") + tlv16(4, tbytes)
    m = min(n << p, 0xFFFFFFFF)
    values = sorted({bucket(c["pid"], m) for c in cands[:n]})
    data = golomb(values, p)
    assert len(data) <= 400
    since = cands[n - 1]["ts"] if n < len(cands) else None
    payload = tlv16(1, bytes([p])) + tlv16(2, struct.pack(">I", m)) + tlv16(3, data) + tlv16(4, tbytes)
    if since is not None:
        payload += tlv16(5, struct.pack(">Q", since))
    return p, m, values, since, payload


# ---------------------------------------------------------------- commands

def key_from(seed, n):
    return Ed25519PrivateKey.from_private_bytes(hashlib.sha256(b"late-phone-%d-%d" % (seed, n)).digest())


def noise_key(key):
    """A stand-in X25519 public key (the phone never does Noise); the peer ID is its SHA-256 prefix (§3.2)."""
    return hashlib.sha256(b"noise" + key.public_key().public_bytes_raw()).digest()


def peer_id(key):
    return hashlib.sha256(noise_key(key)).digest()[:8]


def announce(key, nick, ts):
    """MESH-WIRE §4.7: TLVs (1-byte type and length) nickname, noise key, signing key; signed, TTL 7."""
    payload = bytes([1, len(nick)]) + nick + bytes([2, 32]) + noise_key(key) + bytes([3, 32]) + key.public_key().public_bytes_raw()
    p = dict(type=0x01, ttl=7, ts=ts, sender=peer_id(key), recipient=None, payload=payload, signature=None, rsr=False)
    p["signature"] = key.sign(preimage(p, None))
    return encode(p, compressed_body=None)


def load(path):
    if path == "-":
        return []
    out = []
    with open(path) as f:
        for line in f:
            if line.strip():
                o = json.loads(line)
                p = decode(bytes.fromhex(o["frame"]))
                o.update(ptype=p["type"], ts=p["ts"], pid=packet_id(p))
                out.append(o)
    return out


def generate(args):
    rng = random.Random(args["seed"])
    now = args["now"]
    words = "water gate stage north south lost child found tent medic shuttle bar music map exit fire".split()
    lines = []
    senders = [key_from(args["seed"], i) for i in range(5)]
    span = args.get("span", 3_600_000)
    for i in range(args["messages"]):
        key = senders[i % 5]
        text = (" ".join(rng.choice(words) for _ in range(rng.randint(2, 40))) + " #%d" % i).encode()
        ts = now - span + (i + 1) * (span * 35 // 36 // max(1, args["messages"]))
        p = dict(type=0x02, ttl=7, ts=ts, sender=peer_id(key), recipient=None, payload=text, signature=None, rsr=False)
        body = maybe_compress(text)
        p["signature"] = key.sign(preimage(p, body))
        frame = encode(p, compressed_body=body)
        lines.append(dict(kind="message", frame=frame.hex(), signingKey=key.public_key().public_bytes_raw().hex(),
                          id=packet_id(p).hex()))
    for i in range(args["posts"]):
        key = senders[i % 4]
        created = now - (i + 1) * (span // 6 // max(1, args["posts"]))
        geohash = b"" if i % 3 else b"u4pruydq"
        content = " ".join(rng.choice(words) for _ in range(rng.randint(1, 25))).encode()
        payload = board_post(key, rng.randbytes(16), geohash, content, b"author%d" % (i % 4), created,
                             created + 86_400_000, 1 if i % 5 == 0 else 0)
        p = dict(type=0x23, ttl=7, ts=created, sender=peer_id(key), recipient=None, payload=payload, signature=None, rsr=False)
        body = maybe_compress(payload)
        p["signature"] = key.sign(preimage(p, body))
        frame = encode(p, compressed_body=body)
        lines.append(dict(kind="board", frame=frame.hex(), signingKey=key.public_key().public_bytes_raw().hex(),
                          id=packet_id(p).hex()))
    with open(args["out"], "w") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")
    print(json.dumps({"generated": len(lines)}))


def announces(args):
    """Each original sender's announce at --now (the phones were still around): a responder keeps a message only
    with its sender's announce (APP-BEHAVIOUR §3), so a store filled from the originals takes these first."""
    with open(args["out"], "w") as f:
        for i in range(5):
            key = key_from(args["seed"], i)
            frame = announce(key, b"early%d" % i, args["now"])
            f.write(json.dumps(dict(kind="announce", frame=frame.hex(), signingKey=key.public_key().public_bytes_raw().hex(),
                                    id=packet_id(decode(frame)).hex())) + "\n")
    print(json.dumps({"announces": 5}))


def request(args):
    types = {"union": UNION, "messages": {0x01, 0x02}, "board": {0x23}}[args["types"]]
    held = load(args["holds"])
    p, m, values, since, payload = build_request(types, held)
    key = key_from(args["seed"], 1000)
    pkt = dict(type=0x21, ttl=0, ts=args["now"], sender=peer_id(key), recipient=bytes.fromhex(args["to"]),
               payload=payload, signature=None, rsr=False)
    pkt["signature"] = key.sign(preimage(pkt, None))
    out = dict(frame=encode(pkt, compressed_body=None).hex(), signingKey=key.public_key().public_bytes_raw().hex(),
               sender=pkt["sender"].hex(), p=p, m=m, values=values, since=since, types=sorted(types),
               heldIDs=[h["pid"].hex() for h in held])
    with open(args["out"], "w") as f:
        json.dump(out, f)
    print(json.dumps({"values": len(values), "m": m, "since": since}))


def receive(args):
    with open(args["request"]) as f:
        req = json.load(f)
    originals = load(args["originals"])
    held = set(req["heldIDs"])
    types = set(req["types"])
    errors = []
    seen = {}
    with open(args["replies"]) as f:
        replies = [bytes.fromhex(line.strip()) for line in f if line.strip()]
    by_id = {o["pid"].hex(): o for o in originals}
    for frame in replies:
        try:
            p = decode(frame)
        except Exception as e:
            errors.append("undecodable reply: %s" % e)
            continue
        pid = packet_id(p).hex()
        if p["ttl"] != 0 or not p["rsr"]:
            errors.append("%s: ttl %d rsr %s" % (pid, p["ttl"], p["rsr"]))
        if pid in seen:
            errors.append("%s received twice" % pid)
        seen[pid] = True
        if pid in held:
            errors.append("%s was held by the phone" % pid)
        o = by_id.get(pid)
        if o is None:
            if p["type"] == 0x01:
                continue  # the responder also serves the latest announce per peer (≤ 60 s old)
            errors.append("%s is not an original" % pid)
            continue
        first = bytearray(bytes.fromhex(o["frame"]))
        first[2] = 0
        first[11] |= FLAG_RSR
        if bytes(first) != frame:
            errors.append("%s differs from the original beyond TTL and RSR" % pid)
        if p["type"] == 0x23:
            if not board_verify(p["payload"]):
                errors.append("%s: board signature" % pid)
        elif not verify_outer(p, bytes.fromhex(o["signingKey"])):
            errors.append("%s: outer signature" % pid)
    # Everything the phone lacked is due, except what its filter covers by a false positive or since excludes.
    expected = []
    for o in originals:
        pid = o["pid"].hex()
        if o["ptype"] not in types or pid in held:
            continue
        if req["since"] is not None and o["ts"] < req["since"]:
            continue
        if bucket(o["pid"], req["m"]) in set(req["values"]):
            continue
        expected.append(pid)
    missing = [e for e in expected if e not in seen]
    errors += ["%s not received" % m for m in missing]
    print(json.dumps({"ok": not errors, "received": len(replies), "expected": len(expected), "errors": errors[:20]}))
    return 0 if not errors else 1


# ---------------------------------------------------------------- live, over the virtual radio

def radio_connect(port):
    """The virtual radio: TCP to the hub, each frame a u16 BE length + the frame (0 = keep-alive)."""
    import socket
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.settimeout(0.2)
    return sock


def radio_send(sock, frame):
    sock.sendall(struct.pack(">H", len(frame)) + frame)


def radio_frames(sock, seconds):
    import time
    buf = b""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except OSError:
            chunk = None
        if chunk == b"":
            return
        if chunk:
            buf += chunk
        while len(buf) >= 2:
            n = int.from_bytes(buf[:2], "big")
            if len(buf) < 2 + n:
                break
            frame, buf = buf[2:2 + n], buf[2 + n:]
            if n:
                yield frame


def now_ms():
    import time
    return int(time.time() * 1000)


def live_send(args):
    """The phones that were there first: announce each sender (TTL 7), then send the originals."""
    import time
    sock = radio_connect(args["hub"])
    senders = [key_from(args["seed"], i) for i in range(5)]
    for i, key in enumerate(senders):
        radio_send(sock, announce(key, b"early%d" % i, now_ms()))
    list(radio_frames(sock, 1.0))
    count = 0
    for o in load(args["originals"]):
        radio_send(sock, bytes.fromhex(o["frame"]))
        count += 1
        time.sleep(0.05)
    list(radio_frames(sock, 1.0))
    sock.close()
    print(json.dumps({"sent": count}))
    return 0


def live_request(args):
    """The late phone: announce, learn the bridge's ID from its announce, send one signed TTL-0 REQUEST_SYNC
    with an empty filter (types as asked), and keep every RSR frame for --seconds (fragments reassembled)."""
    sock = radio_connect(args["hub"])
    key = key_from(args["seed"], 1000)
    me = peer_id(key)
    radio_send(sock, announce(key, b"latecomer", now_ms()))
    bridge = None
    for frame in radio_frames(sock, 30):
        try:
            p = decode(frame)
        except Exception:
            continue
        if p["type"] == 0x01 and p["ttl"] == 7 and p["sender"] != me:
            bridge = p["sender"]
            break
    if bridge is None:
        print(json.dumps({"error": "no bridge announce"}))
        return 1
    # Re-announce so the bridge has bound this link and verified the key before the request arrives.
    radio_send(sock, announce(key, b"latecomer", now_ms()))
    list(radio_frames(sock, 0.5))
    types = {"union": UNION, "messages": {0x01, 0x02}, "board": {0x23}}[args["types"]]
    p_, m, values, since, payload = build_request(types, [])
    pkt = dict(type=0x21, ttl=0, ts=now_ms(), sender=me, recipient=bridge, payload=payload, signature=None, rsr=False)
    pkt["signature"] = key.sign(preimage(pkt, None))
    radio_send(sock, encode(pkt, compressed_body=None))
    replies, fragments = [], {}
    for frame in radio_frames(sock, args["seconds"]):
        try:
            p = decode(frame)
        except Exception:
            continue
        if not p["rsr"]:
            continue
        if p["type"] == 0x20:
            fid, index, total, _ = p["payload"][:8], *struct.unpack(">HHB", p["payload"][8:13])
            fragments.setdefault(fid, {})[index] = p["payload"][13:]
            if len(fragments[fid]) == total:
                replies.append(b"".join(fragments.pop(fid)[i] for i in range(total)))
            continue
        replies.append(frame)
    sock.close()
    with open(args["out"], "w") as f:
        json.dump(dict(frame="", signingKey=key.public_key().public_bytes_raw().hex(), sender=me.hex(), p=p_, m=m,
                       values=values, since=since, types=sorted(types), heldIDs=[]), f)
    with open(args["replies"], "w") as f:
        for r in replies:
            f.write(r.hex() + "\n")
    print(json.dumps({"replies": len(replies), "bridge": bridge.hex()}))
    return 0


def board_tombstone(key, post_id, deleted):
    """BOARD.md §3-§4: kind 2, postID, author key, deletedAt, signature over 0x14 "bitchat-board-del-v1" ‖ postID ‖ deletedAt."""
    pub = key.public_key().public_bytes_raw()
    sig = key.sign(bytes([20]) + b"bitchat-board-del-v1" + post_id + struct.pack(">Q", deleted))
    return tlv16(1, b"\x02") + tlv16(2, post_id) + tlv16(5, pub) + tlv16(11, struct.pack(">Q", deleted)) + tlv16(10, sig)


def board_frame(key, payload, ts):
    """A 0x23 broadcast as iOS sends it: TTL 7, the outer packet signed by the author's device key (BOARD.md §2)."""
    p = dict(type=0x23, ttl=7, ts=ts, sender=peer_id(key), recipient=None, payload=payload, signature=None, rsr=False)
    body = maybe_compress(payload)
    p["signature"] = key.sign(preimage(p, body))
    return encode(p, compressed_body=body)


def live_board(args, payload_for):
    """Announces the author's phone, waits for a bridge's announce, sends one board packet, lingers a second."""
    sock = radio_connect(args["hub"])
    key = key_from(args["seed"], 2000)
    me = peer_id(key)
    radio_send(sock, announce(key, b"author", now_ms()))
    for frame in radio_frames(sock, 30):
        try:
            p = decode(frame)
        except Exception:
            continue
        if p["type"] == 0x01 and p["sender"] != me:
            break
    payload, extra = payload_for(key)
    frame = board_frame(key, payload, now_ms())
    radio_send(sock, frame)
    list(radio_frames(sock, 1.0))
    sock.close()
    out = dict(frame=frame.hex(), payload=payload.hex(), signingKey=key.public_key().public_bytes_raw().hex(), **extra)
    with open(args["out"], "w") as f:
        json.dump(out, f)
    print(json.dumps(out))
    return 0


def live_post(args):
    """The author's phone on another island posts one geohash board post (--geohash, --text, --lifetime ms)."""
    created = now_ms()
    post_id = hashlib.sha256(b"post" + str(args["seed"]).encode() + str(created).encode()).digest()[:16]

    def payload_for(key):
        expires = created + args.get("lifetime", 3_600_000)
        return (board_post(key, post_id, args["geohash"].encode(), args["text"].encode(), b"author", created, expires, 0),
                dict(postID=post_id.hex(), createdAt=created, expiresAt=expires))
    return live_board(args, payload_for)


def live_delete(args):
    """The same author deletes the post named in --post (a live-post output file) with a tombstone."""
    with open(args["post"]) as f:
        post_id = bytes.fromhex(json.load(f)["postID"])
    return live_board(args, lambda key: (board_tombstone(key, post_id, now_ms()), dict(postID=post_id.hex())))


def listen(args):
    """A passive phone radio that records every 0x23 packet it hears for --seconds (one JSON line each, flushed):
    the frame's fields, whether the inner signature verifies, and the payload (board posts are not fragmented
    at the hub's MTU). RSR frames are recorded too, flagged: a phone drops those it did not ask for."""
    sock = radio_connect(args["hub"])
    me = peer_id(key_from(args["seed"], 3000))
    # No announce: on a shared hub the bridge binds the hub's link to the first phone that announces (BOARD.md
    # §9.4 check 2), and that should be the late phone asking for sync, not this passive radio.
    print(json.dumps({"ready": True}), flush=True)
    with open(args["out"], "w") as f:
        for frame in radio_frames(sock, args["seconds"]):
            try:
                p = decode(frame)
            except Exception:
                continue
            if p["type"] != 0x23 or p["sender"] == me:
                continue
            try:
                valid = board_verify(p["payload"])
            except Exception:
                valid = False
            f.write(json.dumps(dict(ttl=p["ttl"], ts=p["ts"], sender=p["sender"].hex(), rsr=p["rsr"],
                                    payload=p["payload"].hex(), innerValid=valid)) + "\n")
            f.flush()
    sock.close()
    return 0


def main(argv):
    cmd, rest = argv[1], argv[2:]
    args = {}
    for i in range(0, len(rest), 2):
        k, v = rest[i].lstrip("-"), rest[i + 1]
        args[k] = int(v) if k in ("seed", "now", "messages", "posts", "span", "hub", "seconds", "lifetime") else v
    if cmd == "generate":
        generate(args)
    elif cmd == "announces":
        announces(args)
    elif cmd == "request":
        request(args)
    elif cmd == "receive":
        return receive(args)
    elif cmd == "live-send":
        return live_send(args)
    elif cmd == "live-request":
        return live_request(args)
    elif cmd == "live-post":
        return live_post(args)
    elif cmd == "live-delete":
        return live_delete(args)
    elif cmd == "listen":
        return listen(args)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
