#!/usr/bin/env python3
"""Fake BlueZ on a PRIVATE system bus (python-dbusmock 'bluez5' + our GATT additions) against the real
bitchat-bridge binary. Run by BlueZTests (FakeBlueZTests); needs BRIDGE_TEST_VENV's python.

    fake_bluez_test.py BRIDGE_BINARY REPO_ROOT

Checks: start-up errors (no BlueZ, unknown adapter, permission denied: one line, exit 1); registration
(RegisterApplication with our root, advertisement active); our exported tree (GetManagedObjects,
advertisement properties); the peripheral role (StartNotify, WriteValue with device/mtu options ->
signed announce + message notified within the MTU; the bridge prints the fake central's message); the
central role (discovery of a fake bitchat device -> Connect, StartNotify, WriteValue "command" announce;
notified frames reach the bridge); the adapter powered off reports the transport down and, powered on again,
registered again and up; at SIGTERM the application and advertisement are unregistered; `run` on BlueZ:
/healthz 503 within 5 s of the adapter powering off or bluetoothd going away, 200 when it is back. Prints CHECK lines
and FAKE-BLUEZ PASS; exit 0 only if all passed.
"""
import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time

import dbus
from dbusmock import DBusTestCase
from dbus_fast import BusType, Message, MessageType, Variant
from dbus_fast.aio import MessageBus

BIN, ROOT = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(ROOT, "tools", "bletestbed"))
import bitchat_phone as bp  # noqa: E402

MOCK = "org.freedesktop.DBus.Mock"
APP = "/org/bitchat/bridge/hci0"
CHR = APP + "/service0/char0"
T0 = time.monotonic()


def check(ok, what):
    print(f"CHECK {'ok' if ok else 'FAILED'}: {what}", flush=True)
    if not ok:
        raise SystemExit(1)


class Bridge:
    def __init__(self, *extra):
        self.proc = subprocess.Popen([BIN, "mesh", "listen", "--ephemeral", *extra], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=dict(os.environ))
        self.out, self.err = [], []
        for stream, sink in ((self.proc.stdout, self.out), (self.proc.stderr, self.err)):
            threading.Thread(target=lambda s=stream, k=sink: [k.append(line) for line in s], daemon=True).start()

    def wait_for(self, pred, timeout, sink=None, after=0):
        """True once a line (from index `after` on) satisfies `pred`."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if any(pred(line) for line in list(sink if sink is not None else self.out)[after:]):
                return True
            time.sleep(0.05)
        return False

    def message(self, text):
        def pred(line):
            try:
                ev = json.loads(line)
            except ValueError:
                return False
            return ev.get("event") == "message" and ev.get("text") == text
        return pred

    def stop(self):
        self.proc.terminate()
        try:
            return self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return -9


def run_bridge_expect_failure(extra, needle):
    p = subprocess.run([BIN, "mesh", "listen", "--ephemeral", *extra], capture_output=True, text=True, timeout=30)
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    check(p.returncode == 1 and len(lines) == 1 and needle in lines[0], f"{extra} -> exit 1, one line with {needle!r} "
          f"(got rc={p.returncode}, {lines})")


def add_obj(mock, path, iface, props, methods):
    root = dbus.Interface(mock, MOCK)
    root.AddObject(path, iface, props, methods)
    root.EmitSignal("org.freedesktop.DBus.ObjectManager", "InterfacesAdded", "oa{sa{sv}}",
                    [dbus.ObjectPath(path), dbus.Dictionary({iface: dbus.Dictionary(props, signature="sv")}, signature="sa{sv}")])


def add_fake_peripheral(bus, mock):
    """A remote bitchat peripheral (the template's AddDevice has wrong property types; built by hand)."""
    dev = "/org/bluez/hci0/dev_AA_BB_CC_DD_EE_01"
    add_obj(mock, dev, "org.bluez.Device1", {
        "Address": "AA:BB:CC:DD:EE:01", "AddressType": "random", "Alias": "phone", "Adapter": dbus.ObjectPath("/org/bluez/hci0"),
        "Paired": False, "Connected": False, "Trusted": False, "Blocked": False, "LegacyPairing": False,
        "ServicesResolved": False, "UUIDs": dbus.Array([], signature="s"), "RSSI": dbus.Int16(-60),
        "ManufacturerData": dbus.Dictionary({}, signature="qv"), "ServiceData": dbus.Dictionary({}, signature="sv"),
    }, [("Disconnect", "", "", "self.UpdateProperties('org.bluez.Device1', {'Connected': dbus.Boolean(False), 'ServicesResolved': dbus.Boolean(False)})")])
    devm = dbus.Interface(bus.get_object("org.bluez", dev), MOCK)
    devm.AddMethod("org.bluez.Device1", "Connect", "", "",
                   "self.UpdateProperties('org.bluez.Device1', {'Connected': dbus.Boolean(True), 'ServicesResolved': dbus.Boolean(True)})")
    svc = dev + "/service000a"
    add_obj(mock, svc, "org.bluez.GattService1", {"UUID": bp.SERVICE_UUID, "Device": dbus.ObjectPath(dev), "Primary": True,
                                                   "Includes": dbus.Array([], signature="o")}, [])
    chr_ = svc + "/char000b"
    add_obj(mock, chr_, "org.bluez.GattCharacteristic1", {
        "UUID": bp.CHARACTERISTIC_UUID, "Service": dbus.ObjectPath(svc), "Value": dbus.Array([], signature="y"),
        "Notifying": False, "Flags": dbus.Array(["read", "write", "write-without-response", "notify"], signature="s"),
        "MTU": dbus.UInt16(247)}, [
        ("ReadValue", "a{sv}", "ay", "ret = dbus.Array([], signature='y')"),
        ("WriteValue", "aya{sv}", "", ""),
        ("StartNotify", "", "", "self.UpdateProperties('org.bluez.GattCharacteristic1', {'Notifying': dbus.Boolean(True)})"),
        ("StopNotify", "", "", "")])
    devm.UpdateProperties("org.bluez.Device1", {"UUIDs": dbus.Array([bp.SERVICE_UUID], signature="s"), "RSSI": dbus.Int16(-50)})
    return dev, chr_


async def peripheral_role(bridge, addr):
    client = await MessageBus(bus_address=addr, bus_type=BusType.SYSTEM).connect()
    # Find the bridge: the one connection that serves our application root.
    reply = await client.call(Message(destination="org.freedesktop.DBus", path="/org/freedesktop/DBus",
                                      interface="org.freedesktop.DBus", member="ListNames"))
    owner, objects = None, None
    for name in reply.body[0]:
        if not name.startswith(":") or name == client.unique_name:
            continue
        r = await client.call(Message(destination=name, path=APP, interface="org.freedesktop.DBus.ObjectManager",
                                      member="GetManagedObjects"))
        if r.message_type == MessageType.METHOD_RETURN:
            owner, objects = name, r.body[0]
            break
    check(owner is not None, "the bridge serves GetManagedObjects on its application root")
    svc = objects.get(APP + "/service0", {}).get("org.bluez.GattService1", {})
    chrc = objects.get(CHR, {}).get("org.bluez.GattCharacteristic1", {})
    check(svc.get("UUID").value == bp.SERVICE_UUID and svc.get("Primary").value is True, "primary bitchat service")
    check(chrc.get("UUID").value == bp.CHARACTERISTIC_UUID and chrc.get("Service").value == APP + "/service0"
          and chrc.get("Flags").value == ["read", "write", "write-without-response", "notify"], "characteristic, back-pointer, flags")
    r = await client.call(Message(destination=owner, path=APP + "/advertisement0", interface="org.freedesktop.DBus.Properties",
                                  member="GetAll", signature="s", body=["org.bluez.LEAdvertisement1"]))
    adv = {k: v.value for k, v in r.body[0].items()}
    check(adv == {"Type": "peripheral", "ServiceUUIDs": [bp.SERVICE_UUID]}, f"advertisement properties {adv}")

    frames = asyncio.Queue()

    def on_msg(m):
        if m.message_type == MessageType.SIGNAL and m.member == "PropertiesChanged" and m.path == CHR and "Value" in m.body[1]:
            frames.put_nowait(bytes(m.body[1]["Value"].value))
    client.add_message_handler(on_msg)
    await client.call(Message(destination="org.freedesktop.DBus", path="/org/freedesktop/DBus", interface="org.freedesktop.DBus",
                              member="AddMatch", signature="s", body=[f"type='signal',sender='{owner}',path='{CHR}'"]))

    async def call(member, signature="", body=()):
        r = await client.call(Message(destination=owner, path=CHR, interface="org.bluez.GattCharacteristic1",
                                      member=member, signature=signature, body=list(body)))
        check(r.message_type == MessageType.METHOD_RETURN, f"{member} answered ({r.error_name or 'ok'})")
        return r
    await call("StartNotify")
    phone = bp.Phone("fake-central")
    device, mtu = "/org/bluez/hci0/dev_11_22_33_44_55_66", 185
    options = {"device": Variant("o", device), "mtu": Variant("q", mtu), "type": Variant("s", "command")}
    await call("WriteValue", "aya{sv}", [phone.announce(), options])
    got_announce, got_message = False, False
    end = time.monotonic() + 10
    while not (got_announce and got_message) and time.monotonic() < end:
        try:
            frame = await asyncio.wait_for(frames.get(), end - time.monotonic())
        except asyncio.TimeoutError:
            break
        check(len(frame) <= mtu - 3, f"notification of {len(frame)} B fits the link (ATT MTU {mtu})")
        kind, value, _ = phone.receive(frame)
        got_announce |= kind == "announce"
        got_message |= kind == "message" and value == "hello from bridge"
    check(got_announce, "the bridge notified a signed announce that verifies")
    check(got_message, "the bridge notified its signed public message after our announce")
    await call("WriteValue", "aya{sv}", [phone.message("hello from the fake central"), options])
    check(bridge.wait_for(bridge.message("hello from the fake central"), 10), "the bridge printed the fake central's message")
    r = await call("ReadValue", "a{sv}", [{}])
    check(bytes(r.body[0]) == b"", "ReadValue carries nothing")
    client.disconnect()


def central_role(bridge, bus, mock):
    dev, chr_ = add_fake_peripheral(bus, mock)
    chrm = dbus.Interface(bus.get_object("org.bluez", chr_), MOCK)
    devm = dbus.Interface(bus.get_object("org.bluez", dev), MOCK)
    phone = bp.Phone("fake-peripheral")
    end, bridge_announce = time.monotonic() + 15, False
    while time.monotonic() < end and not bridge_announce:
        for call in chrm.GetMethodCalls("WriteValue"):
            value, options = bytes(call[1][0]), dict(call[1][1])
            check(str(options.get("type")) == "command", "central writes are write-without-response (type=command)")
            check(len(value) <= 247 - 3, "central writes fit the characteristic MTU")
            bridge_announce |= phone.receive(value)[0] == "announce"
        time.sleep(0.1)
    check(len(devm.GetMethodCalls("Connect")) >= 1, "the bridge called Device1.Connect on the discovered bitchat device")
    check(len(chrm.GetMethodCalls("StartNotify")) >= 1, "the bridge subscribed (StartNotify)")
    check(bridge_announce, "the bridge wrote its signed announce to the fake peripheral")
    for frame in (phone.announce(), phone.message("hello from the fake peripheral")):
        chrm.UpdateProperties("org.bluez.GattCharacteristic1", {"Value": dbus.Array(list(frame), signature="y")})
        time.sleep(0.2)
    check(bridge.wait_for(bridge.message("hello from the fake peripheral"), 10), "the bridge printed the fake peripheral's message")
    devm.UpdateProperties("org.bluez.Device1", {"Connected": dbus.Boolean(False)})
    check(bridge.wait_for(lambda line: '"link down"' in line and '"central"' in line, 5, bridge.err), "Connected=false takes the link down")


def transport_line(up, needle=""):
    def pred(line):
        try:
            ev = json.loads(line)
        except ValueError:
            return False
        return ev.get("event") == "transport" and ev.get("up") is up and needle in ev.get("detail", "")
    return pred


def power_cycle(bridge, adapter):
    """Issue 15: the transport reports its own state. Powered off: down (and nothing of ours is left to
    use); powered on: registered again, up."""
    mock = dbus.Interface(adapter, MOCK)
    registrations = len(mock.GetMethodCalls("RegisterApplication"))
    # Only lines printed after each change count (earlier "up" lines report link changes).
    seen = len(bridge.out)
    mock.UpdateProperties("org.bluez.Adapter1", {"Powered": dbus.Boolean(False)})
    check(bridge.wait_for(transport_line(False, "powered off"), 5, after=seen), "adapter powered off: the transport reports down within 5 s")
    seen = len(bridge.out)
    mock.UpdateProperties("org.bluez.Adapter1", {"Powered": dbus.Boolean(True)})
    check(bridge.wait_for(transport_line(True, "BlueZ ready"), 10, after=seen), "adapter powered on: the transport reports up again")
    check(len(mock.GetMethodCalls("RegisterApplication")) > registrations, "the application was registered again")


def healthz(port):
    """(status, body) of the bridge's /healthz (503 bodies too); (0, error) while nothing listens."""
    import urllib.error
    import urllib.request
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=3) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError as e:
        return 0, str(e)


def wait_health(port, status, timeout):
    end = time.monotonic() + timeout
    last = (0, "")
    while time.monotonic() < end:
        last = healthz(port)
        if last[0] == status:
            return True, last[1]
        time.sleep(0.1)
    return False, last[1]


def start_fake_bluez():
    """bluez5 template with adapter hci0 and our GATT/advertising methods; returns (process, adapter)."""
    proc, mock = DBusTestCase.spawn_server_template("bluez5", {}, stdout=subprocess.DEVNULL)
    bus = DBusTestCase.get_dbus(system_bus=True)
    mock.AddAdapter("hci0", "bridge-test", dbus_interface="org.bluez.Mock")
    adapter = bus.get_object("org.bluez", "/org/bluez/hci0")
    dbus.Interface(adapter, MOCK).AddMethod("org.bluez.GattManager1", "RegisterApplication", "oa{sv}", "", "")
    dbus.Interface(adapter, MOCK).AddMethod("org.bluez.GattManager1", "UnregisterApplication", "o", "", "")
    return proc, adapter


def stop_process(proc):
    proc.terminate()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def run_health_cycle(adapter, restart_bluez):
    """Issue 15: `bitchat-bridge run` on BlueZ: /healthz follows the transport's own state — 503 within 5 s
    of the adapter powering off (our application is gone with it), naming the mesh; 200 once it is powered
    and registered again. The relay is unreachable on purpose: inside the 30 s startup grace (no relay has
    answered yet) the relay check passes, so only the mesh decides."""
    import socket
    import tempfile
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    data = tempfile.mkdtemp(prefix="fake-bluez-run-")
    env = dict(os.environ, BRIDGE_GEOHASH="u4pruy", BRIDGE_DATA_DIR=data, BRIDGE_RELAYS="ws://127.0.0.1:9",
               BRIDGE_RELAY_DIRECTORY="off", BRIDGE_MESH="bluez:hci0", BRIDGE_HTTP_LISTEN=f"127.0.0.1:{port}")
    proc = subprocess.Popen([BIN, "run"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    err = []
    threading.Thread(target=lambda: [err.append(line) for line in proc.stderr], daemon=True).start()
    mock = dbus.Interface(adapter, MOCK)
    try:
        ok, body = wait_health(port, 200, 15)
        check(ok, f"run on BlueZ: /healthz 200 once registered ({body.strip()})")
        mock.UpdateProperties("org.bluez.Adapter1", {"Powered": dbus.Boolean(False)})
        t = time.monotonic()
        ok, body = wait_health(port, 503, 5)
        check(ok and "mesh: down" in body and "powered off" in body,
              f"run on BlueZ: adapter off -> /healthz 503 naming the mesh within 5 s ({time.monotonic() - t:.2f} s: {body.strip()})")
        mock.UpdateProperties("org.bluez.Adapter1", {"Powered": dbus.Boolean(True)})
        ok, body = wait_health(port, 200, 10)
        check(ok, f"run on BlueZ: adapter on -> /healthz 200 again ({body.strip()})")
        # bluetoothd goes away (our application with it) and comes back empty: 503, then registered again, 200.
        t = time.monotonic()
        restart_bluez(lambda: check(wait_health(port, 503, 5)[0],
                                    f"run on BlueZ: bluetoothd gone -> /healthz 503 within 5 s ({time.monotonic() - t:.2f} s)"))
        ok, body = wait_health(port, 200, 15)
        check(ok, f"run on BlueZ: bluetoothd back -> registered again, /healthz 200 ({body.strip()})")
    finally:
        proc.terminate()
        try:
            rc = proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = -9
        if rc != 0:
            print("".join(err[-20:]))
    check(rc == 0, "run on BlueZ: SIGTERM stops it cleanly")


def main():
    signal.alarm(100)  # the whole run is bounded even if a child hangs
    DBusTestCase.start_system_bus()
    addr = os.environ["DBUS_SYSTEM_BUS_ADDRESS"]
    try:
        run_bridge_expect_failure(["--mesh", "bluez"], "BlueZ is not running")
        proc, mock = DBusTestCase.spawn_server_template("bluez5", {}, stdout=subprocess.DEVNULL)
        bus = DBusTestCase.get_dbus(system_bus=True)
        try:
            run_bridge_expect_failure(["--mesh", "bluez"], "no Bluetooth adapter")
            mock.AddAdapter("hci0", "bridge-test", dbus_interface="org.bluez.Mock")
            adapter = bus.get_object("org.bluez", "/org/bluez/hci0")
            run_bridge_expect_failure(["--mesh", "bluez:hci4"], "adapter hci4 not found (available: hci0)")
            dbus.Interface(adapter, MOCK).AddMethod("org.bluez.GattManager1", "RegisterApplication", "oa{sv}", "",
                                                    "raise dbus.exceptions.DBusException('denied by policy', "
                                                    "name='org.freedesktop.DBus.Error.AccessDenied')")
            run_bridge_expect_failure(["--mesh", "bluez:hci0"], "permission denied")
            dbus.Interface(adapter, MOCK).AddMethod("org.bluez.GattManager1", "RegisterApplication", "oa{sv}", "", "")
            dbus.Interface(adapter, MOCK).AddMethod("org.bluez.GattManager1", "UnregisterApplication", "o", "", "")
            bridge = Bridge("--mesh", "bluez:hci0", "--nickname", "bridge", "--say", "hello from bridge")
            try:
                check(bridge.wait_for(lambda line: '"BlueZ ready"' in line, 15, bridge.err), "the bridge registered (BlueZ ready)")
                calls = dbus.Interface(adapter, MOCK).GetMethodCalls("RegisterApplication")
                check(any(str(c[1][0]) == APP for c in calls), f"RegisterApplication({APP})")
                active = adapter.Get("org.bluez.LEAdvertisingManager1", "ActiveInstances", dbus_interface=dbus.PROPERTIES_IFACE)
                check(int(active) == 1, "one advertisement registered")
                asyncio.run(peripheral_role(bridge, addr))
                central_role(bridge, bus, mock)
                power_cycle(bridge, adapter)
            finally:
                rc = bridge.stop()
                if rc != 0:
                    print("".join(bridge.err[-20:]))
            check(rc == 0, "SIGTERM stops the bridge cleanly")
            calls = dbus.Interface(adapter, MOCK).GetMethodCalls("UnregisterApplication")
            check(any(str(c[1][0]) == APP for c in calls), f"at stop: UnregisterApplication({APP})")
            active = adapter.Get("org.bluez.LEAdvertisingManager1", "ActiveInstances", dbus_interface=dbus.PROPERTIES_IFACE)
            check(int(active) == 0, "at stop: the advertisement is unregistered")
            check(bridge.wait_for(lambda line: '"unregistered from BlueZ"' in line, 3, bridge.err),
                  "the bridge logged its unregistration")
            current = [proc]

            def restart_bluez(while_gone):
                stop_process(current[0])
                while_gone()
                current[0], _ = start_fake_bluez()

            try:
                run_health_cycle(adapter, restart_bluez)
            finally:
                proc = current[0]
        finally:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    finally:
        DBusTestCase.tearDownClass()
    print(f"FAKE-BLUEZ PASS in {time.monotonic() - T0:.1f}s", flush=True)


if __name__ == "__main__":
    main()
