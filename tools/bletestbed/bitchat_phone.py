"""A scripted bitchat phone's codec side: bitchat-cli 0.2.3 encodes and signs (byte-identical to the apps
when nothing is compressed); `cryptography` verifies what the bridge sends. Shared by the fake-BlueZ test
(Tests/BlueZTests/Fixtures/fake_bluez_test.py) and the emulated-radio phones (ble_phone_*.py).
"""
import hashlib
import os
import struct
import time
import zlib

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from bitchat_cli.identity import IdentityKeys
from bitchat_cli.protocol import AnnouncementPacket, BitchatPacket, FragmentReassembler, MessagePadding, MessageType

SERVICE_UUID = "f47b5e2d-4a9e-4c5a-9b3f-8e1d2c3a4b5c"
CHARACTERISTIC_UUID = "a1b2c3d4-e5f6-4a5b-8c9d-0e1f2a3b4c5d"
FRAGMENT_OVERHEAD = 43  # MESH-WIRE §6.2: 14 + 8 + 8 + 13


def now_ms() -> int:
    return int(time.time() * 1000)


def spec_preimage(pkt: BitchatPacket) -> bytes:
    """MESH-WIRE §4.3 with the §2.5 compression rule (v1): what a sender that compressed signed."""
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


def verifies(key: Ed25519PublicKey, pkt: BitchatPacket) -> bool:
    if pkt.signature is None:
        return False
    for preimage in (pkt.data_for_signing, lambda: spec_preimage(pkt)):
        try:
            key.verify(pkt.signature, preimage())
            return True
        except Exception:  # noqa: BLE001
            pass
    return False


class Phone:
    """One bitchat identity: builds signed frames, decodes and verifies frames from the bridge."""

    def __init__(self, nickname: str):
        self.ident = IdentityKeys()
        self.nickname = nickname
        self.noise = self.ident.noise_public_key_bytes()
        self.peer_id = hashlib.sha256(self.noise).digest()[:8]
        self.keys = {}  # sender id -> Ed25519PublicKey (from verified announces)
        self.nicknames = {}
        self.reassembler = FragmentReassembler()

    def _signed(self, ptype, payload: bytes) -> bytes:
        pkt = BitchatPacket(type=ptype, sender_id=self.peer_id, recipient_id=None, timestamp=now_ms(), payload=payload)
        pkt.signature = self.ident.sign(pkt.data_for_signing())
        return pkt.encode(padding=False)

    def announce(self) -> bytes:
        payload = AnnouncementPacket(self.nickname, self.noise, self.ident.signing_public_key_bytes()).encode()
        return self._signed(MessageType.ANNOUNCE, payload)

    def message(self, text: str) -> bytes:
        return self._signed(MessageType.MESSAGE, text.encode())

    def frames_for(self, frame: bytes, limit: int) -> list:
        """`frame` itself if it fits `limit` (ATT MTU − 3), else v1 fragments (§6) that each fit."""
        if len(frame) <= limit:
            return [frame]
        original = BitchatPacket.decode(frame)
        chunk = max(64, limit - FRAGMENT_OVERHEAD)
        chunks = [frame[i:i + chunk] for i in range(0, len(frame), chunk)]
        fid = os.urandom(8)
        out = []
        for index, part in enumerate(chunks):
            payload = fid + index.to_bytes(2, "big") + len(chunks).to_bytes(2, "big") + bytes([original.type]) + part
            pkt = BitchatPacket(type=MessageType.FRAGMENT, sender_id=self.peer_id, recipient_id=None,
                                timestamp=original.timestamp, payload=payload, ttl=original.ttl)
            encoded = pkt.encode(padding=False)
            assert len(encoded) <= limit, (len(encoded), limit)
            out.append(encoded)
        return out

    def receive(self, frame: bytes):
        """Decodes one notification/write. Returns ("announce", nick, sender_hex) for a *verified* announce,
        ("message", text, sender_hex) for a message verified against its sender's announced key,
        ("fragment", None, None) for an incomplete fragment, or ("other"/"bad", reason, None)."""
        try:
            pkt = BitchatPacket.decode(frame)
        except Exception as e:  # noqa: BLE001 - the reason is reported
            return ("bad", f"decode: {e}", None)
        if pkt.type == MessageType.FRAGMENT:
            inner = self.reassembler.add(pkt)
            if inner is None:
                return ("fragment", None, None)
            return self.receive(inner)
        if pkt.type == MessageType.ANNOUNCE:
            ann = AnnouncementPacket.decode(pkt.payload)
            if hashlib.sha256(ann.noise_public_key).digest()[:8] != pkt.sender_id:
                return ("bad", "announce sender does not match its noise key", None)
            key = Ed25519PublicKey.from_public_bytes(ann.signing_public_key)
            if not verifies(key, pkt):
                return ("bad", "announce signature does not verify", None)
            self.keys[pkt.sender_id] = key
            self.nicknames[pkt.sender_id] = ann.nickname
            return ("announce", ann.nickname, pkt.sender_id.hex())
        if pkt.type == MessageType.MESSAGE:
            key = self.keys.get(pkt.sender_id)
            if key is None:
                return ("bad", "message from an unannounced sender", None)
            if not verifies(key, pkt):
                return ("bad", "message signature does not verify", None)
            return ("message", pkt.payload.decode(), pkt.sender_id.hex())
        return ("other", f"type 0x{pkt.type:02x}", pkt.sender_id.hex())


def long_text(n: int, tag: str) -> str:
    """A deterministic ASCII text of exactly n bytes (the 2 KB fragmentation checks)."""
    base = f"[{tag}] " + "the quick brown fox jumps over the lazy dog 0123456789 "
    return (base * (n // len(base) + 1))[:n]
