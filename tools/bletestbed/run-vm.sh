#!/bin/bash
# run-vm.sh — boot Debian's Bluetooth-enabled kernel under qemu/KVM with the
# host's filesystem as root (9p read-only + tmpfs overlay), run ONE command
# inside, power off, and return the command's exit status.
#
#   run-vm.sh [options] [--] COMMAND [ARGS...]
#   run-vm.sh [options] -e 'shell code'
#   run-vm.sh [options]                 # no command: runs ble-e2e.sh (the BLE demo)
#
# Options:
#   -m MEM       guest memory (qemu -m syntax), default 512M   (env BLETESTBED_MEM)
#   -c CPUS      guest vCPUs, default 2                        (env BLETESTBED_CPUS)
#   -t SECONDS   timeout for the command inside the guest, default 120
#                (the whole qemu process is killed 60 s after that)
#   -e CODE      run CODE with bash -c inside the guest
#   --no-kvm     use TCG software emulation instead of KVM (same as
#                BLETESTBED_ACCEL=tcg; --kvm / BLETESTBED_ACCEL=kvm forces KVM).
#                Default "auto": KVM if /dev/kvm is usable AND is a real
#                VMX/SVM KVM; TCG if /dev/kvm is missing or is kvm_pvm (see
#                README: a stock kernel cannot boot under PVM).
#   --kernel-log show kernel messages on the console (default: quiet)
#                (BLETESTBED_TS=1 prefixes every console line with the host
#                seconds since qemu was started: boot profiling)
#   --setup      only install/prepare everything (apt packages, kernel, venv,
#                initramfs), then exit
#   -h           this help
#
# Environment: BLETESTBED_CACHE (default /tmp/bletestbed-cache) holds the
# extracted kernel, the initramfs and the Python venv (bleak, dbus-fast).
# Inside the guest the command runs as root in the caller's working directory,
# with BLETESTBED_OUT=/run/bletestbed/out (a host folder, kept when
# BLETESTBED_KEEP=1) and BLETESTBED_VENV set.
# Exit status: the command's; 124 if it timed out inside the guest; 125 if
# the VM failed (no exit status came back); 126 on a setup error.
set -euo pipefail

TOOLS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${BLETESTBED_CACHE:-/tmp/bletestbed-cache}
MEM=${BLETESTBED_MEM:-512M}
CPUS=${BLETESTBED_CPUS:-2}
TIMEOUT=${BLETESTBED_TIMEOUT:-120}
ACCEL=${BLETESTBED_ACCEL:-auto}
KLOG=0
SETUP_ONLY=0
SHELL_CODE=

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
log() { echo "bletestbed: $*" >&2; }

while [ $# -gt 0 ]; do
	case "$1" in
	-m) MEM=$2; shift 2 ;;
	-c) CPUS=$2; shift 2 ;;
	-t) TIMEOUT=$2; shift 2 ;;
	-e) SHELL_CODE=$2; shift 2 ;;
	--no-kvm) ACCEL=tcg; shift ;;
	--kvm) ACCEL=kvm; shift ;;
	--kernel-log) KLOG=1; shift ;;
	--setup) SETUP_ONLY=1; shift ;;
	-h|--help) usage; exit 0 ;;
	--) shift; break ;;
	-*) log "unknown option $1"; usage >&2; exit 126 ;;
	*) break ;;
	esac
done

# ---------------------------------------------------------------- setup ---
APT_PKGS=(qemu-system-x86 bluez bluez-test-tools busybox-static kmod cpio dbus)
PY_PKGS=(bleak==3.1.0 dbus-fast==5.2.0 bitchat-cli==0.2.3)

ensure_packages() {
	local missing=()
	for p in "${APT_PKGS[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
	done
	if [ ${#missing[@]} -gt 0 ]; then
		log "apt-get install ${missing[*]}"
		DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >&2
	fi
}

kernel_pkg() {
	# linux-image-amd64 is the metapackage; it depends on linux-image-<kver>.
	apt-cache depends linux-image-amd64 2>/dev/null |
		awk '/Depends: linux-image-[0-9]/ {print $2; exit}'
}

ensure_kernel() {
	if ! ls "$CACHE"/kernel/boot/vmlinuz-* >/dev/null 2>&1; then
		local pkg
		pkg=$(kernel_pkg)
		[ -n "$pkg" ] || { log "cannot resolve linux-image-amd64 (apt-get update?)"; exit 126; }
		log "downloading + extracting $pkg into $CACHE/kernel (not installed on the host)"
		mkdir -p "$CACHE/deb"
		(cd "$CACHE/deb" && apt-get download "$pkg" >&2 2>/dev/null) ||
			(cd "$CACHE/deb" && apt-get download "$pkg" >&2)
		rm -rf "$CACHE/kernel.tmp"
		dpkg -x "$CACHE"/deb/"$pkg"_*.deb "$CACHE/kernel.tmp"
		local kv
		kv=$(basename "$CACHE"/kernel.tmp/boot/vmlinuz-* | sed 's/^vmlinuz-//')
		depmod -b "$CACHE/kernel.tmp" "$kv"
		mv "$CACHE/kernel.tmp" "$CACHE/kernel"
	fi
	VMLINUZ=$(ls "$CACHE"/kernel/boot/vmlinuz-* | head -1)
	KVER=${VMLINUZ##*/vmlinuz-}
	# Uncompressed ELF vmlinux for qemu's PVH direct boot: skips the
	# real-mode setup and the XZ decompression (~4 s under TCG).
	VMLINUX=$CACHE/kernel/boot/vmlinux-$KVER
	if [ ! -s "$VMLINUX" ]; then
		log "extracting $VMLINUX from $VMLINUZ (PVH boot)"
		/usr/bin/python3 - "$VMLINUZ" "$VMLINUX.tmp" <<-'PY'
			import lzma, sys
			data = open(sys.argv[1], "rb").read()
			off = data.find(b"\xfd7zXZ\x00")
			if off < 0:
			    sys.exit("no XZ payload in " + sys.argv[1])
			elf = lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(data[off:])
			if elf[:4] != b"\x7fELF":
			    sys.exit("payload is not an ELF image")
			open(sys.argv[2], "wb").write(elf)
		PY
		mv "$VMLINUX.tmp" "$VMLINUX"
	fi
}

ensure_venv() {
	if [ ! -x "$CACHE/venv/bin/python" ] ||
		! "$CACHE/venv/bin/python" -c 'import bleak, dbus_fast, bitchat_cli' 2>/dev/null; then
		log "creating Python venv $CACHE/venv with ${PY_PKGS[*]} (PyPI)"
		/usr/bin/python3 -m venv "$CACHE/venv"
		"$CACHE/venv/bin/pip" install -q "${PY_PKGS[@]}" >&2
	fi
}

ensure_initramfs() {
	INITRD=$CACHE/initramfs-$KVER.cpio.gz
	if [ -s "$INITRD" ] && [ "$INITRD" -nt "$TOOLS/initramfs-init.sh" ]; then
		return
	fi
	log "building $INITRD"
	local d=$CACHE/initramfs.tmp m
	rm -rf "$d"
	mkdir -p "$d"/{bin,mods,proc,sys,dev}
	cp /bin/busybox "$d/bin/busybox"
	for a in sh mount umount insmod mkdir cat switch_root sleep echo; do
		ln -s busybox "$d/bin/$a"
	done
	: >"$d/mods.order"
	# Modules needed before the root fs can be mounted, in dependency order.
	for m in virtio_pci 9pnet_virtio 9p overlay; do
		modprobe -d "$CACHE/kernel" -S "$KVER" --show-depends "$m" | awk '$1=="insmod"{print $2}'
	done | awk '!seen[$0]++' | while read -r m; do
		cp "$m" "$d/mods/"
		basename "$m" .ko >>"$d/mods.order"
	done
	install -m 755 "$TOOLS/initramfs-init.sh" "$d/init"
	(cd "$d" && find . | cpio -o -H newc --quiet | gzip -1) >"$INITRD.tmp"
	mv "$INITRD.tmp" "$INITRD"
	rm -rf "$d"
}

mkdir -p "$CACHE"
ensure_packages
ensure_kernel
ensure_venv
ensure_initramfs
if [ "$SETUP_ONLY" = 1 ]; then
	log "setup done: kernel $KVER, initramfs $INITRD, venv $CACHE/venv"
	exit 0
fi

# ------------------------------------------------------------------ run ---
if [ "$ACCEL" = auto ]; then
	if ! [ -r /dev/kvm ] || ! [ -w /dev/kvm ]; then
		log "/dev/kvm not usable: using TCG software emulation"
		ACCEL=tcg
	elif [ -d /sys/module/kvm_pvm ]; then
		# PVM (pagetable-based nested KVM) only runs PVM-enabled guest
		# kernels at speed; Debian's kernel crawls at emulation speed.
		log "/dev/kvm is kvm_pvm (no VMX/SVM): using TCG software emulation"
		ACCEL=tcg
	else
		ACCEL=kvm
	fi
fi

RUNDIR=$(mktemp -d /tmp/bletestbed-run.XXXXXX)
cleanup() { [ "${BLETESTBED_KEEP:-0}" = 1 ] && log "results kept in $RUNDIR" || rm -rf "$RUNDIR"; }
trap cleanup EXIT

{
	if [ -n "$SHELL_CODE" ]; then
		printf '%s\n' "$SHELL_CODE"
	elif [ $# -eq 0 ]; then
		printf 'exec %q\n' "$TOOLS/ble-e2e.sh"
	else
		printf 'exec'; printf ' %q' "$@"; printf '\n'
	fi
} >"$RUNDIR/cmd.sh"
{
	printf 'BLETESTBED_KVER=%q\n' "$KVER"
	printf 'BLETESTBED_CACHE=%q\n' "$CACHE"
	printf 'BLETESTBED_CWD=%q\n' "$PWD"
	printf 'BLETESTBED_TIMEOUT=%q\n' "$TIMEOUT"
	printf 'export BLETESTBED_TOOLS=%q\n' "$TOOLS"
	printf 'export BLETESTBED_VENV=%q\n' "$CACHE/venv"
	# forward the caller's other BLETESTBED_* variables (e.g. BLETESTBED_BTMON=1)
	while IFS='=' read -r name _; do
		case "$name" in
		BLETESTBED_CACHE | BLETESTBED_TIMEOUT | BLETESTBED_MEM | BLETESTBED_CPUS | BLETESTBED_ACCEL | BLETESTBED_KEEP) ;;
		BLETESTBED_*) printf 'export %s=%q\n' "$name" "${!name}" ;;
		esac
	done < <(env)
} >"$RUNDIR/env"

APPEND="console=ttyS0 panic=-1 rdinit=/init bletestbed.init=$TOOLS/guest-init.sh"
APPEND+=" tsc=reliable no_timer_check i8042.noaux i8042.nomux i8042.nokbd i8042.nopnp"
[ "$KLOG" = 1 ] || APPEND+=" quiet loglevel=1"

[ "$ACCEL" = tcg ] && APPEND+=" mitigations=off"
# PVH boot of the ELF vmlinux by default; BLETESTBED_BOOT=bzimage boots vmlinuz
BOOT_IMAGE=$VMLINUX
[ "${BLETESTBED_BOOT:-pvh}" = bzimage ] && BOOT_IMAGE=$VMLINUZ

QEMU=(qemu-system-x86_64
	-machine pc -m "$MEM" -smp "$CPUS"
	-nodefaults -no-user-config -display none -vga none -no-reboot
	-kernel "$BOOT_IMAGE" -initrd "$INITRD" -append "$APPEND"
	-chardev stdio,id=con,signal=off -serial chardev:con
	-virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap"
	-virtfs "local,path=$RUNDIR,mount_tag=btout,security_model=none,multidevs=remap"
	-device virtio-rng-pci
)
if [ "$ACCEL" = kvm ]; then
	# -arch-capabilities: qemu 7.2 aborts on nested hosts that refuse MSR 0x10a
	QEMU+=(-accel kvm -cpu host,-arch-capabilities)
else
	QEMU+=(-accel "tcg,thread=multi,tb-size=256" -cpu max)
fi

log "booting $KVER ($ACCEL, $CPUS vCPU, $MEM)"
T0=$EPOCHREALTIME
echo "$T0" >"$RUNDIR/h_t0"
set +e
timeout -k 5 $((TIMEOUT + 60)) "${QEMU[@]}" </dev/null 2>&1 |
	while IFS= read -r line; do
		line=${line%$'\r'}
		case "$line" in
		*@@BLETESTBED-CMD-START@@*) echo "$EPOCHREALTIME" >"$RUNDIR/h_cmd_start" ;;
		*@@BLETESTBED-CMD-END@@*) echo "$EPOCHREALTIME" >"$RUNDIR/h_cmd_end" ;;
		*)
			if [ "${BLETESTBED_TS:-0}" = 1 ]; then
				printf '%8.3f| %s\n' "$(awk -v a="$EPOCHREALTIME" -v b="$T0" 'BEGIN{print a-b}')" "$line"
			else
				printf '%s\n' "$line"
			fi
			;;
		esac
	done
QRC=${PIPESTATUS[0]}
set -e
T1=$EPOCHREALTIME

if [ -s "$RUNDIR/exit_code" ]; then
	RC=$(cat "$RUNDIR/exit_code")
else
	log "no exit status came back from the VM (qemu rc=$QRC)"
	RC=125
fi
if [ -s "$RUNDIR/h_cmd_start" ] && [ -s "$RUNDIR/h_cmd_end" ]; then
	TS=$(cat "$RUNDIR/h_cmd_start")
	TE=$(cat "$RUNDIR/h_cmd_end")
	UP=$(cut -d' ' -f2 "$RUNDIR/t_userspace" 2>/dev/null || echo 0)
	log "$(awk -v t0="$T0" -v t1="$T1" -v up="$UP" -v ts="$TS" -v te="$TE" 'BEGIN {
		printf "timing (host clock): boot = qemu start->command start %.2fs (guest uptime at stage 2: %.2fs), command %.2fs, power-off %.2fs, total %.2fs",
			ts - t0, up, te - ts, t1 - te, t1 - t0 }')"
	log "guest memory at end (kB): $(cat "$RUNDIR/meminfo_end" 2>/dev/null)"
fi
log "exit status $RC"
exit "$RC"
