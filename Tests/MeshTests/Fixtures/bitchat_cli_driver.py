#!/usr/bin/env python3
"""Differential driver: bitchat-cli 0.2.3 (PyPI) as the reference codec for bitchat-bridge's tests.

One process handles a whole batch (JSON lines), so 1 000+ cases cost one interpreter start.

  generate N SEED   bitchat-cli encodes and signs N packets; prints one JSON case per line
  verify FILE       decodes and verifies every case in FILE (JSON lines written by the Swift test)

bitchat-cli never compresses and signs the uncompressed pre-image. For frames the Swift side compressed,
`verify` also builds the MESH-WIRE §4.3 pre-image independently here (zlib level 5, raw, re-applied
compression, PKCS#7 to the bucket) — the byte layout the apps use.
"""
import hashlib
import json
import random
import struct
import sys
import types
import zlib

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from bitchat_cli.identity import IdentityKeys
from bitchat_cli.protocol import (AnnouncementPacket, BitchatPacket, FragmentReassembler, MessagePadding,
                                  MessageType)
from bitchat_cli.ble_service import BLEService

ALPHABET = "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJ0123456789.,!?-éüßçñ漢字мир🙂🎉"


def peer_id(noise: bytes) -> bytes:
    return hashlib.sha256(noise).digest()[:8]


def random_text(rng: random.Random, lo: int, hi: int) -> str:
    return "".join(rng.choice(ALPHABET) for _ in range(rng.randint(lo, hi)))


def generate(n: int, seed: int) -> None:
    rng = random.Random(seed)
    kinds = ["announce", "message", "leave", "fragments", "directed"]
    for i in range(n):
        ident = IdentityKeys()
        noise = ident.noise_public_key_bytes()
        sender = peer_id(noise)
        kind = kinds[i % len(kinds)]
        ts = 1_750_000_000_000 + rng.randrange(10**9)
        recipient = None
        case = {"kind": kind, "signingKey": ident.signing_public_key_bytes().hex(), "sender": sender.hex(),
                "timestamp": ts}
        if kind == "announce":
            nick = random_text(rng, 1, 20)
            payload = AnnouncementPacket(nick, noise, ident.signing_public_key_bytes()).encode()
            ptype = MessageType.ANNOUNCE
            case["nickname"] = nick
        elif kind == "leave":
            payload, ptype = b"", MessageType.LEAVE
        elif kind == "fragments":
            payload, ptype = random_text(rng, 500, 1500).encode(), MessageType.MESSAGE
        else:
            payload, ptype = random_text(rng, 0, 150).encode(), MessageType.MESSAGE
            if kind == "directed":
                recipient = bytes(rng.randrange(256) for _ in range(8))
        pkt = BitchatPacket(type=ptype, sender_id=sender, recipient_id=recipient, timestamp=ts, payload=payload)
        pkt.signature = ident.sign(pkt.data_for_signing())
        if kind == "fragments":
            fake = types.SimpleNamespace(state=types.SimpleNamespace(my_peer_id=sender))
            frames = BLEService._fragment(fake, pkt.encode(padding=False), ptype)
        else:
            frames = [pkt.encode(padding=rng.random() < 0.5)]
        case.update({"type": int(ptype), "recipient": recipient.hex() if recipient else None,
                     "payloadHex": payload.hex(), "frames": [f.hex() for f in frames]})
        print(json.dumps(case))


def spec_preimage(pkt: BitchatPacket) -> bytes:
    """MESH-WIRE §4.3 with the §2.5 compression rule (v1 only)."""
    payload = pkt.payload
    flags = 0x01 if pkt.recipient_id is not None else 0
    body = None
    if len(payload) >= 100 and len(set(payload)) / min(len(payload), 256) < 0.9:
        c = zlib.compressobj(5, zlib.DEFLATED, -15, 8, zlib.Z_DEFAULT_STRATEGY)
        out = c.compress(payload) + c.flush()
        if 0 < len(out) < len(payload):
            body = struct.pack(">H", len(payload)) + out
            flags |= 0x04
    region = body if body is not None else payload
    data = struct.pack(">BBBQBH", 1, pkt.type, 0, pkt.timestamp, flags, len(region)) + pkt.sender_id
    if pkt.recipient_id is not None:
        data += pkt.recipient_id
    data += region
    return MessagePadding.pad(data, MessagePadding.optimal_block_size(len(data)))


def check(case: dict) -> str:
    frames = [bytes.fromhex(f) for f in case["frames"]]
    if case["kind"] == "fragments":
        reassembler = FragmentReassembler()
        inner = None
        for f in frames:
            frag = BitchatPacket.decode(f)
            if frag is None or frag.type != MessageType.FRAGMENT:
                return "fragment did not decode"
            inner = reassembler.add(frag) or inner
        if inner is None:
            return "fragments did not reassemble"
        pkt = BitchatPacket.decode(inner)
    else:
        pkt = BitchatPacket.decode(frames[0])
    if pkt is None:
        return "frame did not decode"
    if pkt.type != case["type"]:
        return f"type {pkt.type} != {case['type']}"
    if pkt.sender_id.hex() != case["sender"]:
        return "sender differs"
    if (pkt.recipient_id.hex() if pkt.recipient_id else None) != case["recipient"]:
        return "recipient differs"
    if pkt.timestamp != case["timestamp"] or pkt.ttl != 7:
        return "timestamp/ttl differ"
    if pkt.payload.hex() != case["payloadHex"]:
        return "payload differs"
    if pkt.signature is None:
        return "no signature"
    key = Ed25519PublicKey.from_public_bytes(bytes.fromhex(case["signingKey"]))
    try:
        key.verify(pkt.signature, pkt.data_for_signing())
        verified = "cli"
    except Exception:
        try:
            key.verify(pkt.signature, spec_preimage(pkt))
            verified = "spec"
        except Exception:
            return "signature does not verify"
    if case.get("compressed") and verified != "spec":
        return "compressed frame verified against an uncompressed pre-image"
    if case["kind"] == "announce":
        ann = AnnouncementPacket.decode(pkt.payload)
        if ann is None or ann.nickname != case["nickname"]:
            return "announce did not decode"
        if peer_id(ann.noise_public_key) != pkt.sender_id or ann.signing_public_key.hex() != case["signingKey"]:
            return "announce keys differ"
    return ""


def verify(path: str) -> None:
    with open(path) as handle:
        for index, line in enumerate(handle):
            if not line.strip():
                continue
            try:
                error = check(json.loads(line))
            except Exception as exc:  # report, never abort the batch
                error = f"exception: {exc!r}"
            print(json.dumps({"index": index, "ok": error == "", "error": error}))


if __name__ == "__main__":
    if sys.argv[1] == "generate":
        generate(int(sys.argv[2]), int(sys.argv[3]))
    elif sys.argv[1] == "verify":
        verify(sys.argv[2])
    else:
        sys.exit("usage: bitchat_cli_driver.py generate N SEED | verify FILE")
    sys.stdout.flush()
