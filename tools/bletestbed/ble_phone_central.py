#!/usr/bin/env python3
"""A scripted bitchat phone as a BLE CENTRAL (bleak, a real BlueZ client) against the bridge's peripheral.

    ble_phone_central.py --adapter hci1 --tag round1 [--expect TEXT ...] [--long N]

Scans for the bitchat service, connects, subscribes, writes a signed announce (bitchat-cli codec), waits
for the bridge's verified announce, writes a public message and (with --long N) an N-byte message cut
into fragments that fit the negotiated MTU, then waits for every --expect text from the bridge
(reassembling fragments, verifying signatures). Prints PHONE-SENT/PHONE-GOT lines; exit 0 = all done.
"""
import argparse
import asyncio
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bleak import BleakClient, BleakScanner  # noqa: E402
from bleak.exc import BleakError  # noqa: E402
import bitchat_phone as bp  # noqa: E402
from ble_central import install_bluez566_connected_workaround  # noqa: E402

T0 = time.monotonic()


def log(*a):
    print(f"[phone-central {time.monotonic() - T0:7.3f}s]", *a, flush=True)


async def run(args, phone):
    bluez = {"adapter": args.adapter}
    t = time.monotonic()
    device = await BleakScanner.find_device_by_filter(
        lambda d, ad: bp.SERVICE_UUID in [u.lower() for u in ad.service_uuids], timeout=args.scan_timeout, bluez=bluez)
    if device is None:
        log("FAIL: no device advertising the bitchat service")
        return 1
    log(f"found {device.address} in {time.monotonic() - t:.2f}s")
    got = asyncio.Queue()
    t = time.monotonic()
    async with BleakClient(device, timeout=args.connect_timeout, bluez=bluez) as client:
        # bleak's mtu_size is 23 until asked: AcquireWrite reports the negotiated ATT MTU.
        try:
            await client._backend._acquire_mtu()
        except Exception as e:  # noqa: BLE001
            log(f"(could not acquire the MTU: {e}; using the default)")
        limit = client.mtu_size - 3
        log(f"connected in {time.monotonic() - t:.2f}s; ATT MTU {client.mtu_size} (value limit {limit})")
        await client.start_notify(bp.CHARACTERISTIC_UUID, lambda _c, data: got.put_nowait(bytes(data)))
        await client.write_gatt_char(bp.CHARACTERISTIC_UUID, phone.announce(), response=False)
        log("PHONE-SENT announce", phone.peer_id.hex())
        expected = set(args.expect)
        bridge = None
        deadline = time.monotonic() + args.exchange_timeout
        sent_messages = False
        while bridge is None or expected:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                log(f"FAIL: timeout; bridge announce {'seen' if bridge else 'missing'}, still expected: "
                    f"{[e[:40] for e in expected]}")
                return 1
            try:
                frame = await asyncio.wait_for(got.get(), timeout=remaining)
            except asyncio.TimeoutError:
                continue
            if len(frame) > limit:
                log(f"FAIL: notification of {len(frame)} B exceeds the value limit {limit}")
                return 1
            kind, value, sender = phone.receive(frame)
            if kind == "announce" and bridge is None:
                bridge = sender
                log(f"PHONE-GOT announce from {sender} nickname={value!r} (signature verified)")
            elif kind == "message":
                log(f"PHONE-GOT message from {sender} ({len(value)} B): {value[:60]!r}")
                expected.discard(value)
            elif kind == "bad":
                log(f"FAIL: bad frame from the bridge: {value}")
                return 1
            if bridge is not None and not sent_messages:
                sent_messages = True
                text = f"hello from bleak central {args.tag}"
                await client.write_gatt_char(bp.CHARACTERISTIC_UUID, phone.message(text), response=False)
                log("PHONE-SENT message", repr(text))
                if args.long:
                    frames = phone.frames_for(phone.message(bp.long_text(args.long, "phone-" + args.tag)), limit)
                    for f in frames:
                        await client.write_gatt_char(bp.CHARACTERISTIC_UUID, f, response=False)
                        await asyncio.sleep(0.03)
                    log(f"PHONE-SENT long message {args.long} B as {len(frames)} fragment(s) of <= {limit} B")
        await asyncio.sleep(args.linger)
    log(f"PASS ({args.tag}) in {time.monotonic() - T0:.2f}s")
    return 0


async def run_with_retries(args):
    phone = bp.Phone(args.nickname)
    for attempt in range(1, args.attempts + 1):
        try:
            return await run(args, phone)
        except BleakError as e:
            log(f"attempt {attempt}/{args.attempts} failed: {e}")
            if attempt == args.attempts:
                return 1
            await asyncio.sleep(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--adapter", default="hci1")
    ap.add_argument("--tag", default="round1")
    ap.add_argument("--nickname", default="bleak")
    ap.add_argument("--expect", action="append", default=[])
    ap.add_argument("--expect-long", type=int, default=0, help="also expect the bridge's long text of N bytes")
    ap.add_argument("--long", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=90)
    ap.add_argument("--scan-timeout", type=float, default=60,
                    help="a phone keeps scanning; 60 s covers slow emulated discovery on a loaded host (21-30 s seen)")
    ap.add_argument("--connect-timeout", type=float, default=20)
    ap.add_argument("--exchange-timeout", type=float, default=30)
    ap.add_argument("--linger", type=float, default=1.0)
    ap.add_argument("--attempts", type=int, default=3)
    args = ap.parse_args()
    if args.expect_long:
        args.expect.append(bp.long_text(args.expect_long, "bridge"))
    install_bluez566_connected_workaround()
    try:
        return asyncio.run(asyncio.wait_for(run_with_retries(args), timeout=args.timeout))
    except asyncio.TimeoutError:
        log("FAIL: overall timeout")
        return 1


if __name__ == "__main__":
    sys.exit(main())
