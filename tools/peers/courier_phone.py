#!/usr/bin/env python3
"""A bitchat phone that sends and receives private mail through a courier, modelled from COURIER.md §6 alone (issue 24).

Independent of the bridge's Swift code: the envelope TLV and the recipient tag from COURIER.md §1.2-§1.4 (hmac, hashlib,
struct), the 0x04 packet from §2.1 and §6.3, the drop event from §3.1 (signed with nostr-sdk, published with raw NIP-01
over `websockets`); framing, signatures and the announce from late_phone.py (MESH-WIRE §2, §4.3, §4.7, written from the
specs for issue 17). The phone does no Noise: the ciphertext is random bytes, as §6.2 says a gateway cannot tell.

  vectors
      Checks this file's tag and envelope code against COURIER.md §1.4 and §1.6; prints {"ok": …}; exit 1 when not ok.
  deposit --hub PORT --seed N --recipient-seed M [--courier NICK] [--expiry-ms MS] [--bad-signature] --out FILE
      Phone N announces, waits for the announce of the peer named --courier (default bridge), and deposits one envelope for phone M (its tag for today,
      expiry now + 1 h unless --expiry-ms, random ciphertext of 96-300 bytes, copies 4) as iOS does (§2.2): a 0x04 to
      the bridge, TTL 7, signed by the phone (or with one signature bit flipped). Writes {envelope, tag, expiryMs}.
  phone --hub PORT --seed N --seconds S [--announce-every S]
      Phone N announces (again every --announce-every s, default 15: iOS's cadence) and prints every 0x04 addressed to
      it as it comes, "MAIL <json>": sender, ttl, envelope (hex), signatureValid (under the sender's announced Ed25519
      key), parsed. Prints "READY <json>" with its peer ID and tags first.
  seal --recipient-seed M [--expiry-ms MS]
      An envelope for phone M as its sender's app seals it (its tag for today, random ciphertext 96-300 bytes, copies 1,
      expiry now + 1 h unless --expiry-ms). Prints {envelope, tag, expiryMs}.
  drop --relay URL --envelope HEX [--x HEX] [--expiration S] [--content TEXT] [--created-at S]
      Another gateway's drop (§3.1): kind 1401 under a fresh key, x = the envelope's tag, expiration = expiry / 1000,
      content = base64 of the envelope; each part can be overridden to make a bad one. Prints {"id": …, "ok": …}.
  drops --relay URL --seconds S
      Every kind-1401 event the relay holds or receives within S seconds, one JSON line each: id, pubkey, tags, content.
"""
import asyncio
import base64
import hashlib
import hmac
import json
import os
import random
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from late_phone import announce, decode, encode, key_from, noise_key, now_ms, peer_id, preimage, radio_connect, radio_frames, radio_send  # noqa: E402

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey  # noqa: E402

TAG_LABEL = b"bitchat-courier-tag-v1"


# ---------------------------------------------------------------- COURIER.md §1

def day_of(unix_ms):
    return max(0, unix_ms) // 1000 // 86400


def tag(noise_pub, day):
    """§1.4: HMAC-SHA256(key = Noise static public key, "bitchat-courier-tag-v1" ‖ u32 BE day)[0..16]."""
    return hmac.new(noise_pub, TAG_LABEL + struct.pack(">I", day), hashlib.sha256).digest()[:16]


def tlv(t, v):
    return struct.pack(">BH", t, len(v)) + v


def envelope(recipient_tag, expiry_ms, ciphertext, copies=1, prekey=None):
    """§1.2: 01 tag, 02 expiry (u64 BE ms), 03 ciphertext, 04 copies only when > 1, 05 prekey ID when set."""
    out = tlv(1, recipient_tag) + tlv(2, struct.pack(">Q", expiry_ms)) + tlv(3, ciphertext)
    if copies > 1:
        out += tlv(4, bytes([copies]))
    if prekey is not None:
        out += tlv(5, struct.pack(">I", prekey))
    return out


def parse_envelope(data):
    """§1.3 as iOS decodes: unknown types skipped, last repeat wins, copies clamped; None when invalid."""
    fields, off = {}, 0
    while off < len(data):
        if off + 3 > len(data):
            return None
        t, n = data[off], struct.unpack(">H", data[off + 1:off + 3])[0]
        v = data[off + 3:off + 3 + n]
        if len(v) != n:
            return None
        fields[t] = v
        off += 3 + n
    tag_, exp, ct = fields.get(1), fields.get(2), fields.get(3)
    if tag_ is None or len(tag_) != 16 or exp is None or len(exp) != 8 or ct is None or not 1 <= len(ct) <= 16384:
        return None
    copies = fields.get(4, b"\x01")
    return dict(tag=tag_, expiry=struct.unpack(">Q", exp)[0], ciphertext=ct, copies=min(max(copies[0], 1), 8) if len(copies) == 1 else None)


def vectors(_args):
    errors = []
    def want(name, got, expected):
        if got != expected:
            errors.append(f"{name}: {got} != {expected}")
    want("tag 11/20000", tag(b"\x11" * 32, 20000).hex(), "173d54ec4ce3de7b45d355eea6500dde")
    want("tag 22/20000", tag(b"\x22" * 32, 20000).hex(), "664d981a8883942af67dd4c32d3140f2")
    want("tag 33/20254", tag(b"\x33" * 32, 20254).hex(), "4688c0220629c88984a75ea2374f1cdc")
    want("day of 1750000000", day_of(1_750_000_000_000), 20254)
    e1 = envelope(bytes.fromhex("173d54ec4ce3de7b45d355eea6500dde"), 1_900_000_000_000, bytes(range(16)), copies=4)
    want("E1", e1.hex(), "010010173d54ec4ce3de7b45d355eea6500dde020008000001ba60d33800030010000102030405060708090a0b0c0d0e0f04000104")
    want("E1c base64", base64.b64encode(e1[:49]).decode(), "AQAQFz1U7Ezj3ntF01XuplAN3gIACAAAAbpg0zgAAwAQAAECAwQFBgcICQoLDA0ODw==")
    want("E2", envelope(bytes.fromhex("173d54ec4ce3de7b45d355eea6500dde"), 1_900_000_000_000, b"BBBB", prekey=7).hex(),
         "010010173d54ec4ce3de7b45d355eea6500dde020008000001ba60d338000300044242424205000400000007")
    want("truncated E1", parse_envelope(e1[:-1]), None)
    print(json.dumps({"ok": not errors, "errors": errors}))
    return 0 if not errors else 1


# ---------------------------------------------------------------- the phone on the radio

def parse_announce(payload):
    """MESH-WIRE §4.7: 1-byte type and length TLVs; 03 = the Ed25519 signing key."""
    out, off = {}, 0
    while off + 2 <= len(payload):
        t, n = payload[off], payload[off + 1]
        out[t] = payload[off + 2:off + 2 + n]
        off += 2 + n
    return out


def verify(p, signing_key):
    try:
        Ed25519PublicKey.from_public_bytes(signing_key).verify(p["signature"], preimage(p, p["body"]))
        return True
    except Exception:
        return False


def phone_key(seed):
    return key_from(seed, 4000)


def wait_for_courier(sock, me, nickname):
    """The courier to hand mail to: a peer whose signed announce (TTL 7, direct) carries `nickname` (iOS picks among its
    connected verified peers; the test names the bridge so another phone on the hub is never picked)."""
    for frame in radio_frames(sock, 30):
        try:
            p = decode(frame)
        except Exception:
            continue
        if p["type"] == 0x01 and p["ttl"] == 7 and p["sender"] != me and parse_announce(p["payload"]).get(1) == nickname:
            return p["sender"]
    return None


def seal(args):
    now = now_ms()
    rkey = phone_key(args["recipient-seed"])
    expiry = int(args.get("expiry-ms", now + 3_600_000))
    t = tag(noise_key(rkey), day_of(now))
    print(json.dumps(dict(envelope=envelope(t, expiry, os.urandom(random.randint(96, 300))).hex(), tag=t.hex(), expiryMs=expiry)))
    return 0


def deposit(args):
    key, rkey = phone_key(args["seed"]), phone_key(args["recipient-seed"])
    me = peer_id(key)
    sock = radio_connect(args["hub"])
    radio_send(sock, announce(key, b"sender", now_ms()))
    bridge = wait_for_courier(sock, me, args.get("courier", "bridge").encode())
    if bridge is None:
        print(json.dumps({"error": "no announce from the courier"}))
        return 1
    # Announce again so the bridge has bound this link to us (a direct peer) before the deposit arrives.
    radio_send(sock, announce(key, b"sender", now_ms()))
    list(radio_frames(sock, 0.5))
    now = now_ms()
    expiry = int(args.get("expiry-ms", now + 3_600_000))
    env = envelope(tag(noise_key(rkey), day_of(now)), expiry, os.urandom(random.randint(96, 300)), copies=4)
    pkt = dict(type=0x04, ttl=7, ts=now_ms(), sender=me, recipient=bridge, payload=env, signature=None, rsr=False)
    signature = bytearray(key.sign(preimage(pkt, None)))
    if args.get("bad-signature"):
        signature[10] ^= 0x01
    pkt["signature"] = bytes(signature)
    radio_send(sock, encode(pkt, compressed_body=None))
    list(radio_frames(sock, 1.0))
    sock.close()
    out = dict(envelope=env.hex(), tag=tag(noise_key(rkey), day_of(now)).hex(), expiryMs=expiry, bridge=bridge.hex(), sender=me.hex())
    with open(args["out"], "w") as f:
        json.dump(out, f)
    print(json.dumps(out), flush=True)
    return 0


def phone(args):
    import time
    key = phone_key(args["seed"])
    me = peer_id(key)
    now = now_ms()
    mine = noise_key(key)
    ready = dict(peer=me.hex(), noiseKey=mine.hex(), tags=[tag(mine, d).hex() for d in (day_of(now) - 1, day_of(now), day_of(now) + 1)])
    print("READY " + json.dumps(ready), flush=True)
    sock = radio_connect(args["hub"])
    signing = {}
    every = float(args.get("announce-every", 15))
    next_announce = 0.0
    deadline = time.monotonic() + float(args["seconds"])
    while time.monotonic() < deadline:
        if time.monotonic() >= next_announce:
            radio_send(sock, announce(key, b"recipient", now_ms()))
            next_announce = time.monotonic() + every
        for frame in radio_frames(sock, 0.3):
            try:
                p = decode(frame)
            except Exception:
                continue
            if p["type"] == 0x01:
                fields = parse_announce(p["payload"])
                if 3 in fields:
                    signing[p["sender"]] = fields[3]
            elif p["type"] == 0x04 and p["recipient"] == me:
                valid = p["sender"] in signing and p["signature"] is not None and verify(p, signing[p["sender"]])
                print("MAIL " + json.dumps(dict(sender=p["sender"].hex(), ttl=p["ttl"], envelope=p["payload"].hex(),
                                                signatureValid=valid, parsed=parse_envelope(p["payload"]) is not None)), flush=True)
    sock.close()
    return 0


# ---------------------------------------------------------------- the relay side (§3.1)

async def relay_send(url, message, wait_for, seconds):
    import websockets
    async with websockets.connect(url, max_size=1 << 22) as ws:
        await ws.send(json.dumps(message))
        end = asyncio.get_event_loop().time() + seconds
        while True:
            left = end - asyncio.get_event_loop().time()
            if left <= 0:
                return None
            try:
                reply = json.loads(await asyncio.wait_for(ws.recv(), left))
            except asyncio.TimeoutError:
                return None
            if wait_for(reply):
                return reply


def drop(args):
    import nostr_sdk as N
    data = bytes.fromhex(args["envelope"])
    parsed = parse_envelope(data)
    keys = N.Keys.generate()
    tags = [N.Tag.parse(["x", args.get("x", parsed["tag"].hex())]),
            N.Tag.parse(["expiration", str(args.get("expiration", parsed["expiry"] // 1000))])]
    content = args.get("content", base64.b64encode(data).decode())
    builder = N.EventBuilder(N.Kind(1401), content).tags(tags)
    if "created-at" in args:
        builder = builder.custom_created_at(N.Timestamp.from_secs(int(args["created-at"])))
    event = json.loads(builder.finalize(keys).as_json())
    reply = asyncio.run(relay_send(args["relay"], ["EVENT", event], lambda r: r[0] == "OK" and r[1] == event["id"], 10))
    print(json.dumps({"id": event["id"], "ok": bool(reply and reply[2])}), flush=True)
    return 0 if reply and reply[2] else 1


def drops(args):
    import websockets

    async def run():
        seen = []
        async with websockets.connect(args["relay"], max_size=1 << 22) as ws:
            await ws.send(json.dumps(["REQ", "courier-test", {"kinds": [1401], "limit": 500}]))
            end = asyncio.get_event_loop().time() + float(args["seconds"])
            while (left := end - asyncio.get_event_loop().time()) > 0:
                try:
                    message = json.loads(await asyncio.wait_for(ws.recv(), left))
                except asyncio.TimeoutError:
                    break
                if message[0] == "EVENT":
                    e = message[2]
                    seen.append(e["id"])
                    print(json.dumps(dict(id=e["id"], pubkey=e["pubkey"], tags=e["tags"], content=e["content"])), flush=True)
        return seen
    asyncio.run(run())
    return 0


def main(argv):
    command, rest = argv[1], argv[2:]
    args = {}
    i = 0
    while i < len(rest):
        name = rest[i][2:]
        if i + 1 < len(rest) and not rest[i + 1].startswith("--"):
            args[name] = rest[i + 1]
            i += 2
        else:
            args[name] = True
            i += 1
    for numeric in ("hub", "seed", "recipient-seed"):
        if numeric in args:
            args[numeric] = int(args[numeric])
    return {"vectors": vectors, "seal": seal, "deposit": deposit, "phone": phone, "drop": drop, "drops": drops}[command](args)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
