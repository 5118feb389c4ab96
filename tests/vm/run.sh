#!/usr/bin/env bash
# run.sh - run a command in QEMU guests that have real RDMA verbs (Soft-RoCE).
#
# Usage: tests/vm/run.sh [--nodes 1|2] [--timeout SECS] [--node2 'CMD'] [-v]
#                        -- COMMAND [ARG...]
#
# Boots Debian 12 guest(s) from the image of tests/vm/image.sh (built or
# refreshed first; it needs root the first time), under QEMU's TCG (no KVM
# needed), and runs COMMAND with bash in the repository, then powers off.
#
# In each guest:
#   - the repository (the folder two levels above this script) is mounted
#     over 9p at the SAME absolute path as on the host, and is the working
#     directory, so binaries built on the host (build/...) run as they are;
#     writes to it land on the host
#   - rdma_rxe, ib_uverbs and rdma_ucm are loaded; /dev/infiniband/uverbs0 and
#     /dev/infiniband/rdma_cm exist; `ulimit -l unlimited`, `ulimit -n 65536`
#   - --nodes 1 (default): one guest (2 vCPUs); a dummy netdev rdma0 holds
#     10.77.0.1/24 and 10.77.0.2/24, rxe0 runs on it, so two endpoints in one
#     guest talk over rxe (loopback); lo is up
#   - --nodes 2: two guests (1 vCPU each) joined by a QEMU UDP socket netdev
#     on 127.0.0.1 (ports picked per run); guest N has eth0 = 10.77.0.N/24 and
#     rxe0 on eth0, hostname nodeN (/etc/hosts knows node1 and node2).
#     COMMAND runs in guest 1; `--node2 'CMD'` (a bash command line) runs in
#     guest 2, started at the same time (default: sleep until stopped)
#   - environment: RSHARE_VM_NODE=1|2, RSHARE_VM_NODES=1|2, HOME=/root,
#     TMPDIR=/tmp (tmpfs), RSHARE_VM_DIR=/run/rshare-vm: a folder the guests
#     of one run share (9p), free for rendezvous files; the other node's exit
#     status appears there as nodeN.status when its command ends
#   - stdin is /dev/null; there is no udev, systemd, or network beyond the above
#
# Output: COMMAND's stdout and stderr arrive on run.sh's stdout and stderr as
# they are written; guest 2's output goes to stderr, each line prefixed with
# "node2| ". The exit status is COMMAND's. When COMMAND ends, guest 2 is
# stopped (a still-running node2 command is reported on stderr, as is a
# nonzero exit of it).
#
# Failures of the harness itself are loud, on stderr, with the tail of the
# guest's console:
#   124  the run took longer than --timeout (default 300 s, counted from
#        QEMU's start: boot included, an image build not); every QEMU is killed
#   125  a guest could not boot or set up RDMA, or QEMU would not start
# A guest whose virtual NIC stopped transmitting (its console has the
# netdev watchdog's "TX timeout") is said on stderr, "run.sh: guest N: its
# virtual NIC stopped transmitting: ...", whatever the exit status.
# With -v, timing lines (boot, command, total) go to stderr.
#
# Environment: RSHARE_VM_CACHE (image cache, see image.sh), RSHARE_VM_MEM
# (guest memory, default 2G), RSHARE_VM_SMP (vCPUs per guest; default 2 for
# one guest, 1 each for two). For debugging: RSHARE_VM_KEEP=DIR keeps the
# consoles, QEMU's messages and the outputs in DIR; RSHARE_VM_TRACE=1 traces
# the guest's setup (with its uptime) on the console; RSHARE_VM_KERNEL_ARGS
# and RSHARE_VM_QEMU_ARGS add kernel and QEMU arguments.
# Each run works in its own temporary folder (removed at the end, or by the
# next run if this one was killed outright), so runs can go in parallel;
# QEMU dies with run.sh (parent-death signal) and writes nothing to the image
# (snapshot=on).
set -euo pipefail
# The whole script is one block, read before it runs: editing this file
# cannot disturb runs in progress.
{

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
repo=$(cd "$here/../.." && pwd -P)

usage() {
	sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0" >&2
	exit 2
}
die() {
	echo "run.sh: $*" >&2
	exit 125
}

nodes=1 timeout=300 node2_cmd='' verbose=0
while [ $# -gt 0 ]; do
	case "$1" in
		--nodes) nodes=${2:?--nodes needs 1 or 2}; shift 2 ;;
		--nodes=*) nodes=${1#*=}; shift ;;
		--timeout) timeout=${2:?--timeout needs seconds}; shift 2 ;;
		--timeout=*) timeout=${1#*=}; shift ;;
		--node2) node2_cmd=${2?--node2 needs a command}; shift 2 ;;
		--node2=*) node2_cmd=${1#*=}; shift ;;
		-v | --verbose) verbose=1; shift ;;
		-h | --help) usage ;;
		--) shift; break ;;
		*) echo "run.sh: unknown option: $1" >&2; usage ;;
	esac
done
[ $# -gt 0 ] || { echo "run.sh: no COMMAND after --" >&2; usage; }
case "$nodes" in 1 | 2) ;; *) echo "run.sh: --nodes must be 1 or 2" >&2; exit 2 ;; esac
[[ "$timeout" =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: --timeout must be whole seconds" >&2; exit 2; }
[ -z "$node2_cmd" ] || [ "$nodes" = 2 ] || { echo "run.sh: --node2 needs --nodes 2" >&2; exit 2; }

start_us=${EPOCHREALTIME/./}
elapsed() { local d=$((${EPOCHREALTIME/./} - start_us)); printf '%d.%d' $((d / 1000000)) $((d / 100000 % 10)); }
note() { [ "$verbose" = 0 ] || echo "run.sh: [$(elapsed)s] $*" >&2; }

qemu=$(command -v qemu-system-x86_64) || die "qemu-system-x86_64 is missing: run tools/deps.sh"
command -v setpriv >/dev/null || die "setpriv (util-linux) is missing: run tools/deps.sh"
img=$(bash "$here/image.sh") || die "no guest image (tests/vm/image.sh failed)"
for f in vmlinuz initrd.img rootfs.img; do
	[ -s "$img/$f" ] || die "guest image incomplete: no $img/$f"
done
kernel=$img/vmlinuz
[ ! -s "$img/vmlinux" ] || kernel=$img/vmlinux # uncompressed: boots seconds sooner
note "image $img"

# Folders of runs that were killed outright (SIGKILL): their run.sh is gone.
for d in "${TMPDIR:-/tmp}"/rshare-vm.*/; do
	[ -s "$d/run.pid" ] || continue
	kill -0 "$(cat "$d/run.pid")" 2>/dev/null || rm -rf "$d"
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rshare-vm.XXXXXX")
echo $$ >"$tmp/run.pid"
ctl=$tmp/ctl
mkdir "$ctl"
chmod 0755 "$tmp" "$ctl"
pids=() tails=()
cleanup() {
	local p
	for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || :; done
	for p in "${tails[@]}"; do kill "$p" 2>/dev/null || :; done
	wait 2>/dev/null || :
	if [ -n "${RSHARE_VM_KEEP:-}" ]; then
		mkdir -p "$RSHARE_VM_KEEP" && cp -r "$tmp"/. "$RSHARE_VM_KEEP"/ 2>/dev/null || :
	fi
	rm -rf "$tmp" 2>/dev/null || { sleep 0.5; rm -rf "$tmp"; }
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

cp "$here/guest-init.sh" "$ctl/guest-init.sh"
for n in $(seq "$nodes"); do
	printf 'nodes=%q\nrepo=%q\ntrace=%q\n' "$nodes" "$repo" "${RSHARE_VM_TRACE:-0}" >"$ctl/params.$n"
	: >"$ctl/node$n.out"
	: >"$ctl/node$n.err"
done
printf '%q ' "$@" >"$ctl/cmd.1"
echo >>"$ctl/cmd.1"
if [ "$nodes" = 2 ]; then
	printf '%s\n' "${node2_cmd:-exec sleep infinity}" >"$ctl/cmd.2"
fi

# QEMU takes commas in option values doubled.
qv() { printf '%s' "${1//,/,,}"; }

free_udp_port() { # a port that no UDP socket on 127.0.0.1 uses now
	local p
	for _ in $(seq 50); do
		p=$((20000 + RANDOM % 40000))
		if ! ss -Hnlu "sport = :$p" 2>/dev/null | grep -q .; then
			echo "$p"
			return
		fi
	done
	die "no free UDP port found"
}
if [ "$nodes" = 2 ]; then
	port1=$(free_udp_port)
	port2=$(free_udp_port)
	while [ "$port2" = "$port1" ]; do port2=$(free_udp_port); done
fi

boot() { # NODE: start the guest of node NODE in the background
	local n=$1 smp=2 net=()
	if [ "$nodes" = 2 ]; then
		smp=1
		local mine=$port1 peer=$port2
		[ "$n" = 1 ] || { mine=$port2; peer=$port1; }
		net=(-netdev "socket,id=n0,udp=127.0.0.1:$peer,localaddr=127.0.0.1:$mine"
			-device "virtio-net-pci,netdev=n0,mac=52:54:00:4d:00:0$n,romfile=")
	fi
	TMPDIR=$tmp setpriv --pdeathsig KILL -- "$qemu" \
		-nodefaults -no-user-config -display none -no-reboot \
		-accel tcg -cpu max -smp "${RSHARE_VM_SMP:-$smp}" -m "${RSHARE_VM_MEM:-2G}" \
		-kernel "$kernel" -initrd "$img/initrd.img" \
		-append "console=ttyS0 root=/dev/vda rw rootfstype=ext4 init=/sbin/rshare-vm-init quiet loglevel=4 panic=-1 mitigations=off rshare_vm_node=$n ${RSHARE_VM_KERNEL_ARGS:-}" \
		-drive "file=$(qv "$img/rootfs.img"),if=virtio,format=raw,snapshot=on" \
		-virtfs "local,path=$(qv "$ctl"),mount_tag=ctl,security_model=none,multidevs=remap" \
		-virtfs "local,path=$(qv "$repo"),mount_tag=repo,security_model=none,multidevs=remap" \
		"${net[@]}" ${RSHARE_VM_QEMU_ARGS:-} \
		-serial "file:$tmp/console.$n" \
		</dev/null >"$tmp/qemu.$n" 2>&1 &
	pids[n]=$!
}

console_tail() { # NODE
	local n=$1
	echo "---- guest $n: QEMU said ----" >&2
	tail -n 20 "$tmp/qemu.$n" >&2 2>/dev/null || :
	echo "---- guest $n: last console lines ----" >&2
	tail -n 30 "$tmp/console.$n" 2>/dev/null | tr -d '\r' >&2 || :
	if [ -s "$ctl/node$n.fail" ]; then
		echo "---- guest $n: setup failed: $(cat "$ctl/node$n.fail")" >&2
	fi
	echo "----" >&2
}

# nic_stalls: a guest's virtual NIC that stopped transmitting (the guest's
# netdev watchdog: virtio_net "TX timeout", at error level, so on the
# console) is said on stderr, one line a guest.  QEMU's virtio-net under TCG
# has done so now and then in runs of two guests, minutes into the run,
# whatever the guest sent; the guest's network is then gone, for the
# guest's programs and rshare alike.  Callers tell that from a failure of
# what runs inside (tests/run runs such a suite once more).
nic_stalls() {
	local n line
	for n in $(seq "$nodes"); do
		line=$(tr -d '\r' <"$tmp/console.$n" 2>/dev/null |
			grep -m1 -E 'TX timeout on queue|transmit queue [0-9]+ timed out') || continue
		echo "run.sh: guest $n: its virtual NIC stopped transmitting: $line" >&2
	done
}

boot_us=${EPOCHREALTIME/./} # --timeout counts from here, not while image.sh builds
for n in $(seq "$nodes"); do boot "$n"; done
note "QEMU started ($nodes guest(s), TCG)"

# Stream the guests' output while they run; tail drains what is left after
# QEMU exits (--pid).
tail -s 0.2 -c +1 -f --pid="${pids[1]}" "$ctl/node1.out" &
tails+=($!)
tail -s 0.2 -c +1 -f --pid="${pids[1]}" "$ctl/node1.err" >&2 &
tails+=($!)
if [ "$nodes" = 2 ]; then
	tail -s 0.2 -q -c +1 -f --pid="${pids[2]}" "$ctl/node2.out" "$ctl/node2.err" | sed -u 's/^/node2| /' >&2 &
	tails+=($!)
fi

deadline=$((boot_us + timeout * 1000000))
booted=()
timed_out=0
alive() { kill -0 "$1" 2>/dev/null; }
while alive "${pids[1]}"; do
	for n in $(seq "$nodes"); do
		if [ -z "${booted[n]:-}" ] && [ -s "$ctl/node$n.booted" ]; then
			booted[n]=1
			note "guest $n: command starting (guest uptime $(cat "$ctl/node$n.booted") s)"
		fi
		if [ "$n" != 1 ] && [ -z "${reported2:-}" ] && ! alive "${pids[n]}"; then
			reported2=1
			if [ ! -s "$ctl/node$n.status" ]; then
				echo "run.sh: guest $n stopped before its command ended" >&2
				console_tail "$n"
			fi
		fi
	done
	if [ "${EPOCHREALTIME/./}" -ge "$deadline" ]; then
		timed_out=1
		break
	fi
	sleep 0.2
done

if [ $timed_out = 1 ]; then
	for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || :; done
	wait "${tails[@]}" 2>/dev/null || :
	echo "run.sh: TIMEOUT: the run took more than ${timeout}s; QEMU killed" >&2
	nic_stalls
	for n in $(seq "$nodes"); do
		[ -s "$ctl/node$n.booted" ] || echo "run.sh: guest $n had not started its command" >&2
		[ -s "$ctl/node$n.booted" ] || console_tail "$n"
	done
	exit 124
fi

wait "${pids[1]}" 2>/dev/null || :
status1=$(cat "$ctl/node1.status" 2>/dev/null || :)
note "guest 1 off"
if [ "$nodes" = 2 ]; then
	if alive "${pids[2]}" && [ ! -s "$ctl/node2.status" ]; then
		[ -z "$node2_cmd" ] || echo "run.sh: node2 command still running when node1's ended; stopping guest 2" >&2
	fi
	kill -KILL "${pids[2]}" 2>/dev/null || :
	wait "${pids[2]}" 2>/dev/null || :
	status2=$(cat "$ctl/node2.status" 2>/dev/null || :)
	if [ -n "$status2" ] && [ "$status2" != 0 ]; then
		echo "run.sh: node2 command exited with status $status2" >&2
	fi
fi
wait "${tails[@]}" 2>/dev/null || :
nic_stalls

if [ -z "$status1" ]; then
	if [ -s "$ctl/node1.booted" ]; then
		echo "run.sh: guest 1 stopped before its command ended (crash or power-off inside?)" >&2
	else
		echo "run.sh: guest 1 did not boot to the command" >&2
	fi
	console_tail 1
	exit 125
fi
note "done: status $status1"
exit "$status1"
exit
}
