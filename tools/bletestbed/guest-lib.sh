# guest-lib.sh — shell helpers shared by the in-guest scenarios (ble-bridge-e2e.sh, ble-run-e2e.sh).
# Sourced, not run: set SAY_TAG first (the prefix of every progress line).

# Seconds since the guest booted (the scenarios' clock: the guest has no wall clock worth trusting).
up() { cut -d' ' -f1 /proc/uptime; }
say() { echo "[${SAY_TAG:-guest} $(up)] $*"; }

# wait_grep SECONDS FILE PATTERN [COUNT]: until FILE has COUNT lines matching PATTERN (1 by default).
wait_grep() {
	local end=$(( $(date +%s) + $1 )) n
	while :; do
		n=$(grep -c -- "$3" "$2" 2>/dev/null); n=${n:-0}
		[ "$n" -ge "${4:-1}" ] && return 0
		[ "$(date +%s)" -ge "$end" ] && return 1
		sleep 0.2
	done
}
