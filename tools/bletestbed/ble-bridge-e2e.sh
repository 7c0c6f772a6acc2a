#!/bin/bash
# ble-bridge-e2e.sh — INSIDE the VM: bitchat-bridge over real BlueZ and emulated radio (issue 9).
#   usage: ble-bridge-e2e.sh /path/to/bitchat-bridge
# A. bridge = peripheral on hci0 (mesh listen --mesh bluez:hci0), bleak phone = central on hci1:
#    signed announces both ways, a public message and a 2 KB fragmented message both ways.
# R. kill and restart bluetoothd: the bridge re-registers by itself; a new bleak phone connects and its
#    message reaches the same bridge process.
# B. bridge = central on hci0, dbus-fast phone = peripheral on hci1: the same exchange the other way.
# Each bridge must log its unregistration from BlueZ (advertisement + application) at SIGTERM.
# D. `bitchat-bridge doctor` against real BlueZ first: the bus and hci0 (powered, LE central and peripheral) pass,
#    and the testbed's main.conf (BlueZ's defaults) fails on ControllerMode and Privacy, as the rule says.
# Exit 0 only if every step passed; every step is time-bounded. Prints E2E-TIMING lines.
set -uo pipefail
BRIDGE=${1:?usage: ble-bridge-e2e.sh /path/to/bitchat-bridge}
TOOLS=${BLETESTBED_TOOLS:-$(cd "$(dirname "$0")" && pwd)}
PY=${BLETESTBED_VENV:-/tmp/bletestbed-cache/venv}/bin/python
LOGDIR=${BLETESTBED_OUT:-/tmp}
LONG=2048
SAY_TAG=bridge-e2e
. "$TOOLS/guest-lib.sh"
T_START=$(up)
BRIDGE_PID=

dump() {
	for f in "$@"; do echo "----- $(basename "$f") -----"; tail -n 80 "$f" 2>/dev/null; done
	echo "----- bluetoothd.log (tail) -----"; tail -n 40 "$LOGDIR/bluetoothd.log" 2>/dev/null
}
fail() { say "FAIL: $1"; shift; dump "$@"; [ -n "$BRIDGE_PID" ] && kill "$BRIDGE_PID" 2>/dev/null; exit 1; }

# has_message FILE TEXT-or-@longTAG: the bridge printed a verified public message with exactly that text
has_message() {
	"$PY" - "$1" "$2" "$LONG" <<'PYEOF'
import json, sys
sys.path.insert(0, __import__("os").environ["BLETESTBED_TOOLS"])
import bitchat_phone as bp
path, want, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
if want.startswith("@"):
    want = bp.long_text(n, want[1:])
for line in open(path):
    try:
        ev = json.loads(line)
    except ValueError:
        continue
    if ev.get("event") == "message" and ev.get("text") == want:
        sys.exit(0)
sys.exit(1)
PYEOF
}

export BLETESTBED_TOOLS=$TOOLS
BRIDGE_LONG=$("$PY" -c "import sys; sys.path.insert(0, '$TOOLS'); import bitchat_phone as bp; print(bp.long_text($LONG, 'bridge'))")

timeout 100 "$TOOLS/ble-up.sh" 2 || fail "ble-up"
T_UP=$(up)

# ---------------------------------------------------------------- D ---
D_OUT=$LOGDIR/doctor.json
BRIDGE_GEOHASH=u4pruy BRIDGE_DATA_DIR=/tmp/doctor-data BRIDGE_RELAYS=ws://127.0.0.1:9 BRIDGE_RELAY_DIRECTORY=off \
	BRIDGE_MESH=bluez:hci0 timeout 30 "$BRIDGE" doctor --json --timeout 2 --bluez-conf "$TOOLS/main.conf" >"$D_OUT" 2>"$D_OUT.err"
"$PY" - "$D_OUT" <<'PYEOF' || fail "doctor against real BlueZ" "$D_OUT"
import json, sys
checks = {c["name"]: c for c in json.load(open(sys.argv[1]))["checks"]}
def want(name, outcome, detail=""):
    c = checks[name]
    assert c["outcome"] == outcome and detail in c["detail"], (name, c)
want("d-bus", "ok")
want("bluetooth adapter", "ok", "hci0 is present and powered, LE central and peripheral")
want("bluez settings", "fail", "ControllerMode is dual")
print("doctor:", checks["bluetooth adapter"]["detail"])
PYEOF
say "D PASS: doctor reads real BlueZ (bus, hci0 LE central + peripheral, main.conf)"

# ---------------------------------------------------------------- A ---
A_OUT=$LOGDIR/bridge-a.out; A_ERR=$LOGDIR/bridge-a.err
"$BRIDGE" mesh listen --mesh bluez:hci0 --ephemeral --nickname bridge-a \
	--say "hello from bridge" --say "$BRIDGE_LONG" >"$A_OUT" 2>"$A_ERR" &
BRIDGE_PID=$!
wait_grep 30 "$A_ERR" '"BlueZ ready"' || fail "bridge A did not register with BlueZ" "$A_ERR"
T_A_READY=$(up)
say "bridge A registered on hci0 ($(awk -v a="$T_UP" -v b="$T_A_READY" 'BEGIN{printf "%.2fs", b-a}'))"
timeout 120 "$PY" "$TOOLS/ble_phone_central.py" --adapter hci1 --tag round1 \
	--expect "hello from bridge" --expect-long $LONG --long $LONG --timeout 110 >"$LOGDIR/phone-a.log" 2>&1 ||
	fail "bleak central phone (round 1)" "$LOGDIR/phone-a.log" "$A_OUT" "$A_ERR"
cat "$LOGDIR/phone-a.log"
wait_grep 10 "$A_OUT" 'hello from bleak central round1' || fail "bridge A did not print the phone's message" "$A_OUT" "$A_ERR"
has_message "$A_OUT" "hello from bleak central round1" || fail "message line" "$A_OUT"
for _ in $(seq 1 25); do has_message "$A_OUT" "@phone-round1" && break; sleep 0.2; done
has_message "$A_OUT" "@phone-round1" || fail "bridge A did not reassemble the phone's $LONG B message" "$A_OUT" "$A_ERR"
T_A=$(up)
say "A PASS: bleak central <-> bridge peripheral: announces, message, $LONG B fragmented both ways"

# ---------------------------------------------------------------- R ---
kill "$(cat /run/bluetoothd.pid)"; sleep 0.5
/usr/libexec/bluetooth/bluetoothd -n -d -f "$TOOLS/main.conf" >>"$LOGDIR/bluetoothd.log" 2>&1 &
echo $! >/run/bluetoothd.pid
say "bluetoothd restarted (pid $(cat /run/bluetoothd.pid))"
wait_grep 40 "$A_ERR" '"BlueZ ready"' 2 || fail "bridge A did not re-register after the bluetoothd restart" "$A_ERR"
T_R_READY=$(up)
say "bridge A re-registered ($(awk -v a="$T_A" -v b="$T_R_READY" 'BEGIN{printf "%.2fs", b-a}') after the kill)"
timeout 120 "$PY" "$TOOLS/ble_phone_central.py" --adapter hci1 --tag round2 --nickname bleak2 --timeout 110 \
	>"$LOGDIR/phone-r.log" 2>&1 || fail "bleak central phone (after restart)" "$LOGDIR/phone-r.log" "$A_OUT" "$A_ERR"
cat "$LOGDIR/phone-r.log"
wait_grep 10 "$A_OUT" 'hello from bleak central round2' || fail "bridge A did not get the message after the restart" "$A_OUT" "$A_ERR"
kill -TERM "$BRIDGE_PID"; wait "$BRIDGE_PID"; BRIDGE_PID=
grep -q '"unregistered from BlueZ"' "$A_ERR" || fail "bridge A did not unregister from BlueZ at SIGTERM" "$A_ERR"
T_R=$(up)
say "R PASS: bluetoothd restart, bridge re-registered, phone reconnected, same bridge process"

# ---------------------------------------------------------------- B ---
B_OUT=$LOGDIR/bridge-b.out; B_ERR=$LOGDIR/bridge-b.err; P_LOG=$LOGDIR/phone-b.log
timeout 100 "$PY" "$TOOLS/ble_phone_peripheral.py" --adapter hci1 \
	--expect "hello from bridge" --expect-long $LONG --long $LONG --timeout 90 >"$P_LOG" 2>&1 &
PHONE_PID=$!
wait_grep 30 "$P_LOG" PHONE-READY || fail "dbus-fast peripheral phone did not come up" "$P_LOG"
"$BRIDGE" mesh listen --mesh bluez:hci0 --ephemeral --nickname bridge-b \
	--say "hello from bridge" --say "$BRIDGE_LONG" >"$B_OUT" 2>"$B_ERR" &
BRIDGE_PID=$!
wait $PHONE_PID || fail "dbus-fast peripheral phone" "$P_LOG" "$B_OUT" "$B_ERR"
cat "$P_LOG"
for _ in $(seq 1 25); do has_message "$B_OUT" "@phone-peripheral" && break; sleep 0.2; done
has_message "$B_OUT" "hello from dbus-fast peripheral" || fail "bridge B did not print the phone's message" "$B_OUT" "$B_ERR"
has_message "$B_OUT" "@phone-peripheral" || fail "bridge B did not reassemble the phone's $LONG B message" "$B_OUT" "$B_ERR"
kill -TERM "$BRIDGE_PID"; wait "$BRIDGE_PID"; BRIDGE_PID=
grep -q '"unregistered from BlueZ"' "$B_ERR" || fail "bridge B did not unregister from BlueZ at SIGTERM" "$B_ERR"
T_B=$(up)
say "B PASS: bridge central <-> dbus-fast peripheral: announces, message, $LONG B fragmented both ways"

awk -v s="$T_START" -v u="$T_UP" -v a="$T_A" -v r="$T_R" -v b="$T_B" 'BEGIN {
	printf "E2E-TIMING: stack up %.2fs, A (bridge peripheral) %.2fs, R (bluetoothd restart) %.2fs, B (bridge central) %.2fs, whole %.2fs\n",
		u - s, a - u, r - a, b - r, b - s }'
say "PASS"
