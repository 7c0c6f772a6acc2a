#!/usr/bin/env python3
"""A scripted bitchat phone as a BLE PERIPHERAL (dbus-fast GATT server + LE advertisement) for the bridge's
central role.

    ble_phone_peripheral.py --adapter hci1 [--expect TEXT ...] [--expect-long N] [--long N]

Serves the bitchat service/characteristic (read, write, write-without-response, notify) and advertises
the service UUID. Every write from the bridge is decoded and verified (bitchat-cli + cryptography). Once
the bridge's announce verified it notifies its own signed announce, a public message and (with --long N)
an N-byte message as fragments sized to the link (the `mtu` option BlueZ passes with each write). Exits 0
when every --expect text arrived from the bridge. Prints PHONE-READY, PHONE-SENT and PHONE-GOT lines.
"""
import argparse
import asyncio
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dbus_fast import BusType, Variant  # noqa: E402
from dbus_fast.aio import MessageBus  # noqa: E402
from dbus_fast.service import PropertyAccess, ServiceInterface, dbus_property, method  # noqa: E402
import bitchat_phone as bp  # noqa: E402

APP_PATH = "/org/bitchatphone/app"
SVC_PATH = APP_PATH + "/service0"
CHR_PATH = SVC_PATH + "/char0"
ADV_PATH = "/org/bitchatphone/adv0"
T0 = time.monotonic()


def log(*a):
    print(f"[phone-peripheral {time.monotonic() - T0:7.3f}s]", *a, flush=True)


class Service(ServiceInterface):
    def __init__(self):
        super().__init__("org.bluez.GattService1")

    @dbus_property(access=PropertyAccess.READ)
    def UUID(self) -> "s":
        return bp.SERVICE_UUID

    @dbus_property(access=PropertyAccess.READ)
    def Primary(self) -> "b":
        return True


class Characteristic(ServiceInterface):
    def __init__(self, state):
        super().__init__("org.bluez.GattCharacteristic1")
        self._value = b""
        self.notifying = False
        self.state = state

    @dbus_property(access=PropertyAccess.READ)
    def UUID(self) -> "s":
        return bp.CHARACTERISTIC_UUID

    @dbus_property(access=PropertyAccess.READ)
    def Service(self) -> "o":
        return SVC_PATH

    @dbus_property(access=PropertyAccess.READ)
    def Flags(self) -> "as":
        return ["read", "write", "write-without-response", "notify"]

    @dbus_property(access=PropertyAccess.READ)
    def Value(self) -> "ay":
        return self._value

    @dbus_property(access=PropertyAccess.READ)
    def Notifying(self) -> "b":
        return self.notifying

    @method()
    def ReadValue(self, options: "a{sv}") -> "ay":
        return b""

    @method()
    def WriteValue(self, value: "ay", options: "a{sv}"):
        mtu = options.get("mtu")
        if mtu is not None:
            self.state["limit"] = int(mtu.value) - 3
        self.state["inbox"].put_nowait(bytes(value))

    @method()
    def StartNotify(self):
        log("StartNotify (the bridge subscribed)")
        self.notifying = True
        self.emit_properties_changed({"Notifying": True})

    @method()
    def StopNotify(self):
        self.notifying = False

    def notify(self, frame: bytes):
        self._value = frame
        self.emit_properties_changed({"Value": frame})


class Advertisement(ServiceInterface):
    def __init__(self):
        super().__init__("org.bluez.LEAdvertisement1")

    @dbus_property(access=PropertyAccess.READ)
    def Type(self) -> "s":
        return "peripheral"

    @dbus_property(access=PropertyAccess.READ)
    def ServiceUUIDs(self) -> "as":
        return [bp.SERVICE_UUID]

    @method()
    def Release(self):
        log("advertisement released")


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--adapter", default="hci1")
    ap.add_argument("--nickname", default="dbusfast")
    ap.add_argument("--expect", action="append", default=[])
    ap.add_argument("--expect-long", type=int, default=0)
    ap.add_argument("--long", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=90)
    args = ap.parse_args()
    expected = set(args.expect)
    if args.expect_long:
        expected.add(bp.long_text(args.expect_long, "bridge"))

    phone = bp.Phone(args.nickname)
    state = {"inbox": asyncio.Queue(), "limit": 512}  # until a write carries the mtu option
    bus = await MessageBus(bus_type=BusType.SYSTEM).connect()
    adapter_path = f"/org/bluez/{args.adapter}"
    bus.export(SVC_PATH, Service())
    chrc = Characteristic(state)
    bus.export(CHR_PATH, chrc)
    bus.export(ADV_PATH, Advertisement())
    intro = await bus.introspect("org.bluez", adapter_path)
    obj = bus.get_proxy_object("org.bluez", adapter_path, intro)
    await obj.get_interface("org.bluez.GattManager1").call_register_application(APP_PATH, {})
    await obj.get_interface("org.bluez.LEAdvertisingManager1").call_register_advertisement(ADV_PATH, {})
    print("PHONE-READY", phone.peer_id.hex(), flush=True)

    deadline = time.monotonic() + args.timeout
    bridge = None
    sent = False
    while bridge is None or expected or not sent:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            log(f"FAIL: timeout; bridge announce {'seen' if bridge else 'missing'}, still expected: "
                f"{[e[:40] for e in expected]}")
            return 1
        try:
            frame = await asyncio.wait_for(state["inbox"].get(), timeout=remaining)
        except asyncio.TimeoutError:
            continue
        if len(frame) > state["limit"]:
            log(f"FAIL: write of {len(frame)} B exceeds the value limit {state['limit']}")
            return 1
        kind, value, sender = phone.receive(frame)
        if kind == "announce" and bridge is None:
            bridge = sender
            log(f"PHONE-GOT announce from {sender} nickname={value!r} (signature verified; link value limit {state['limit']})")
        elif kind == "message":
            log(f"PHONE-GOT message from {sender} ({len(value)} B): {value[:60]!r}")
            expected.discard(value)
        elif kind == "bad":
            log(f"FAIL: bad frame from the bridge: {value}")
            return 1
        if bridge is not None and not sent:
            sent = True
            if not chrc.notifying:
                log("FAIL: the bridge wrote without subscribing first")
                return 1
            chrc.notify(phone.announce())
            log("PHONE-SENT announce", phone.peer_id.hex())
            await asyncio.sleep(0.3)
            text = "hello from dbus-fast peripheral"
            chrc.notify(phone.message(text))
            log("PHONE-SENT message", repr(text))
            if args.long:
                frames = phone.frames_for(phone.message(bp.long_text(args.long, "phone-peripheral")), state["limit"])
                for f in frames:
                    await asyncio.sleep(0.03)
                    chrc.notify(f)
                log(f"PHONE-SENT long message {args.long} B as {len(frames)} fragment(s) of <= {state['limit']} B")
    await asyncio.sleep(1.0)
    log(f"PASS in {time.monotonic() - T0:.2f}s")
    bus.disconnect()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
