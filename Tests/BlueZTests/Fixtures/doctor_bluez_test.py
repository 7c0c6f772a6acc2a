#!/usr/bin/env python3
"""`bitchat-bridge doctor` against python-dbusmock's 'bluez5' template on a PRIVATE system bus (issue 23). Run by
BlueZTests (FakeBlueZTests); needs BRIDGE_TEST_VENV's python.

    doctor_bluez_test.py BRIDGE_BINARY REPO_ROOT

Checks, each on `doctor --json`'s own outcome for the check: bluetoothd missing (fail, says how to start it); no
adapter (fail); an adapter powered and LE-capable (ok); powered off (warn: the bridge powers it on); blocked by
rfkill (fail, says rfkill unblock); a controller without the peripheral role (fail); the D-Bus policy refusing
GetManagedObjects (fail, names the policy file to install); main.conf as shipped (fail, names ControllerMode and Privacy
and the file) and as the bridge wants it (ok). Prints CHECK lines and DOCTOR-BLUEZ PASS; exit 0 only if all passed.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

import dbus
from dbusmock import DBusTestCase

from fake_bluez_test import BIN, MOCK, check, stop_process

T0 = time.monotonic()
WORK = tempfile.mkdtemp(prefix="doctor-bluez-")
SHIPPED = "[General]\n#ControllerMode = dual\n#JustWorksRepairing = never\n#Privacy = off\n"
WANTED = "[General]\nControllerMode = le\nPrivacy = device\n# JustWorksRepairing: BlueZ's default (never)\n"


def doctor(conf_text):
    conf = os.path.join(WORK, "main.conf")
    with open(conf, "w") as f:
        f.write(conf_text)
    # A relay port where nothing listens: relays fail fast; only the Bluetooth checks are read here.
    env = dict(os.environ, BRIDGE_GEOHASH="u4pruy", BRIDGE_DATA_DIR=os.path.join(WORK, "data"),
               BRIDGE_RELAYS="ws://127.0.0.1:9", BRIDGE_RELAY_DIRECTORY="off", BRIDGE_MESH="bluez")
    p = subprocess.run([BIN, "doctor", "--json", "--timeout", "1", "--bluez-conf", conf], capture_output=True, text=True,
                       env=env, timeout=30)
    check(p.returncode == 1, f"doctor exits 1 (the relay fails): rc={p.returncode} {p.stderr.strip()}")
    return {c["name"]: c for c in json.loads(p.stdout)["checks"]}


def expect(checks, name, outcome, detail="", fix=""):
    c = checks.get(name)
    ok = c is not None and c["outcome"] == outcome and detail in c["detail"] and fix in (c["fix"] or "")
    check(ok, f"{name}: {outcome} with {detail!r} / {fix!r} (got {c})")


def main():
    DBusTestCase.start_system_bus()
    try:
        expect(doctor(SHIPPED), "bluez", "fail", "bluetoothd is not running", "systemctl enable --now bluetooth")
        proc, mock = DBusTestCase.spawn_server_template("bluez5", {}, stdout=subprocess.DEVNULL)
        bus = DBusTestCase.get_dbus(system_bus=True)
        try:
            expect(doctor(SHIPPED), "bluetooth adapter", "fail", "no Bluetooth adapter", "rfkill list")
            mock.AddAdapter("hci0", "doctor-test", dbus_interface="org.bluez.Mock")
            adapter = bus.get_object("org.bluez", "/org/bluez/hci0")
            checks = doctor(SHIPPED)
            expect(checks, "d-bus", "ok")
            expect(checks, "bluetooth adapter", "ok", "hci0 is present and powered, LE central and peripheral")
            expect(checks, "bluez settings", "fail", "ControllerMode is dual", "ControllerMode = le, Privacy = device")
            check("JustWorksRepairing" not in checks["bluez settings"]["detail"], "JustWorksRepairing's default passes")
            expect(doctor(WANTED), "bluez settings", "ok")

            mock_adapter = dbus.Interface(adapter, MOCK)
            # BlueZ ≥ 5.64's PowerState; the template predates it.
            mock_adapter.AddProperty("org.bluez.Adapter1", "PowerState", "on")
            mock_adapter.UpdateProperties("org.bluez.Adapter1", {"Powered": dbus.Boolean(False), "PowerState": "off"})
            expect(doctor(WANTED), "bluetooth adapter", "warn", "powered off", "bluetoothctl power on")
            mock_adapter.UpdateProperties("org.bluez.Adapter1", {"PowerState": "off-blocked"})
            expect(doctor(WANTED), "bluetooth adapter", "fail", "blocked by rfkill", "rfkill unblock bluetooth")
            mock_adapter.UpdateProperties("org.bluez.Adapter1", {"Powered": dbus.Boolean(True), "PowerState": "on",
                                                                 "Roles": dbus.Array(["central"], signature="s")})
            expect(doctor(WANTED), "bluetooth adapter", "fail", "does not offer both LE roles", "both roles")
            mock_adapter.UpdateProperties("org.bluez.Adapter1", {"Roles": dbus.Array(["central", "peripheral"], signature="s")})
            expect(doctor(WANTED), "bluetooth adapter", "ok")

            root = bus.get_object("org.bluez", "/")
            dbus.Interface(root, MOCK).AddMethod(
                "org.freedesktop.DBus.ObjectManager", "GetManagedObjects", "", "a{oa{sa{sv}}}",
                "raise dbus.exceptions.DBusException('Rejected send message', name='org.freedesktop.DBus.Error.AccessDenied')")
            expect(doctor(WANTED), "d-bus", "fail", "refuses uid", "contrib/dbus-bitchat-bridge.conf")
        finally:
            stop_process(proc)
    finally:
        DBusTestCase.tearDownClass()
    print(f"DOCTOR-BLUEZ PASS in {time.monotonic() - T0:.1f}s", flush=True)


if __name__ == "__main__":
    main()
