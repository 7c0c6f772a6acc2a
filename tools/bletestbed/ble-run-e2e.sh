#!/bin/bash
# ble-run-e2e.sh — INSIDE the VM: `bitchat-bridge run` with BRIDGE_MESH=bluez:hci0 (issue 9, item 5).
#   usage: ble-run-e2e.sh /path/to/bitchat-bridge /path/to/project-venv /path/to/tools/peers
# A real Nostr relay (nostr-sdk LocalRelay, tools/peers/sdk_relay.py run by the project venv)
# on 127.0.0.1 in the VM, the bridge's `run` on hci0 (peripheral + central), and a bleak phone central on hci1
# that must receive the run bridge's signed announce and deliver its own announce and public message.
# Exit 0 only if every step passed; every step is time-bounded.
set -uo pipefail
BRIDGE=${1:?usage: ble-run-e2e.sh /path/to/bitchat-bridge /path/to/project-venv [peers-dir]}
VENV=${2:?project venv}
PEERS=${3:?peers dir with sdk_relay.py (tools/peers)}
TOOLS=${BLETESTBED_TOOLS:-$(cd "$(dirname "$0")" && pwd)}
PY=${BLETESTBED_VENV:-/tmp/bletestbed-cache/venv}/bin/python
LOGDIR=${BLETESTBED_OUT:-/tmp}
SAY_TAG=run-e2e
. "$TOOLS/guest-lib.sh"
PIDS=()
fail() { say "FAIL: $1"; shift; for f in "$@"; do echo "----- $(basename "$f") -----"; tail -n 60 "$f"; done; kill "${PIDS[@]}" 2>/dev/null; exit 1; }
export BLETESTBED_TOOLS=$TOOLS
timeout 100 "$TOOLS/ble-up.sh" 2 || fail "ble-up"
RELAY_LOG=$LOGDIR/relay.log; RUN_ERR=$LOGDIR/run.err; RUN_OUT=$LOGDIR/run.out
"$VENV/bin/python" "$PEERS/sdk_relay.py" --port 17021 >"$RELAY_LOG" 2>&1 &
PIDS+=($!)
wait_grep 30 "$RELAY_LOG" READY || fail "relay did not start" "$RELAY_LOG"
mkdir -p /tmp/run-bridge
BRIDGE_GEOHASH=u4pruyd BRIDGE_DATA_DIR=/tmp/run-bridge BRIDGE_RELAYS=ws://127.0.0.1:17021 BRIDGE_RELAY_DIRECTORY=off \
	BRIDGE_MESH=bluez:hci0 BRIDGE_HTTP_LISTEN=off BRIDGE_NICKNAME=run-bridge BRIDGE_POW_BITS=8 BRIDGE_LOG_LEVEL=info \
	"$BRIDGE" run >"$RUN_OUT" 2>"$RUN_ERR" &
RUN_PID=$!
PIDS+=($RUN_PID)
wait_grep 40 "$RUN_ERR" '"BlueZ ready"' || fail "run did not register with BlueZ" "$RUN_ERR"
wait_grep 40 "$RUN_ERR" 'relay connected' || fail "run did not connect to the relay" "$RUN_ERR"
say "bitchat-bridge run is up: BlueZ on hci0 and the relay on loopback"
timeout 100 "$PY" "$TOOLS/ble_phone_central.py" --adapter hci1 --tag run --nickname runphone --timeout 90 \
	>"$LOGDIR/phone-run.log" 2>&1 || fail "bleak central phone against run" "$LOGDIR/phone-run.log" "$RUN_ERR"
cat "$LOGDIR/phone-run.log"
grep -q "run-bridge" "$LOGDIR/phone-run.log" || fail "the phone did not see the run bridge's announce" "$LOGDIR/phone-run.log"
kill -TERM "$RUN_PID"
for _ in $(seq 1 50); do kill -0 "$RUN_PID" 2>/dev/null || break; sleep 0.2; done
kill -0 "$RUN_PID" 2>/dev/null && fail "run did not stop on SIGTERM within 10 s" "$RUN_ERR"
wait "$RUN_PID"; rc=$?
[ "$rc" = 0 ] || fail "run exited $rc after SIGTERM" "$RUN_ERR"
grep -q '"msg":"summary".*"mesh.peers":1' "$RUN_ERR" || fail "run's summary does not count the phone as a mesh peer" "$RUN_ERR"
kill "${PIDS[@]}" 2>/dev/null
say "PASS: bitchat-bridge run (BRIDGE_MESH=bluez:hci0) <-> bleak phone: signed announces, public message; clean SIGTERM"
