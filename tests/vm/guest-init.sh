#!/bin/bash
# guest-init.sh - second stage of the guest's init, run as PID 1's child by
# guest-boot.sh from the control share (/run/rshare-vm). run.sh copies it
# there for every run, so it can change without rebuilding the image.
#
# Reads /run/rshare-vm/params.N (N = this guest's node number, from the
# kernel command line), then:
#   - mounts /tmp, /dev/shm, /dev/pts (tmpfs / devpts), sets the hostname nodeN
#   - brings lo up; loads rdma_rxe, ib_uverbs, rdma_ucm (so /dev/infiniband/
#     uverbs0 and rdma_cm exist: devtmpfs makes them, there is no udev)
#   - one guest: a dummy netdev rdma0 with 10.77.0.1/24 and 10.77.0.2/24 and
#     rxe0 on it; two guests: eth0 (virtio-net) with 10.77.0.N/24, rxe0 on it
#   - waits until rxe0's port is ACTIVE and has its IPv4 GIDs
#   - mounts the repository (tag "repo") at the same path as on the host
#   - runs cmd.N with bash in the repository, with ulimit -l/-n raised and
#     RSHARE_VM_NODE=N, RSHARE_VM_NODES, RSHARE_VM_DIR=/run/rshare-vm set,
#     stdout/stderr to nodeN.out / nodeN.err in the control share
#   - writes the status to nodeN.status and powers off.
# Markers in the control share tell run.sh how far it got: nodeN.booted (the
# command is about to start), nodeN.status; nodeN.fail says why setup failed.

D=/run/rshare-vm
read -r cmdline </proc/cmdline
[[ $cmdline =~ rshare_vm_node=([0-9]+) ]] && node=${BASH_REMATCH[1]} || node=1
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH

say() { echo "rshare-vm[node$node]: $*" >/dev/console; }
off() {
	sync
	busybox poweroff -f
	echo o >/proc/sysrq-trigger
	sleep 10
}
fail() {
	say "setup failed: $*"
	echo "$*" >"$D/node$node.fail"
	off
}

# shellcheck source=/dev/null
. "$D/params.$node" || fail "no params.$node in the control share"
# params sets: nodes (1 or 2), repo (absolute path), trace (1: trace setup)
nodes=${nodes:-1}
if [ "${trace:-0}" = 1 ]; then
	PS4='+ [$(</proc/uptime)] '
	exec 2>/dev/console
	set -x
fi

# (Every program started costs tens of milliseconds under TCG: setup uses
# bash builtins where it can.)
mkdir -p /tmp /dev/shm /dev/pts
mount -t tmpfs -o mode=1777,nosuid,nodev tmp /tmp || fail "cannot mount /tmp"
mount -t tmpfs -o mode=1777,nosuid,nodev shm /dev/shm || fail "cannot mount /dev/shm"
[ -e /dev/pts/ptmx ] || mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts /dev/pts
[ -e /dev/ptmx ] || ln -s pts/ptmx /dev/ptmx
# What udev would make: /dev/fd, /dev/stdin, /dev/stdout, /dev/stderr.
ln -sf /proc/self/fd /dev/fd
ln -sf /proc/self/fd/0 /dev/stdin
ln -sf /proc/self/fd/1 /dev/stdout
ln -sf /proc/self/fd/2 /dev/stderr
hostname "node$node"

modprobe -a rdma_rxe ib_uverbs rdma_ucm || fail "cannot load rdma_rxe, ib_uverbs, rdma_ucm"

if [ "$nodes" = 1 ]; then
	dev=rdma0
	addrs=(10.77.0.1 10.77.0.2)
	netcmds="link add rdma0 type dummy"
else
	dev=eth0
	addrs=("10.77.0.$node")
	netcmds=
	modprobe virtio_net || fail "cannot load virtio_net"
	for _ in {1..100}; do
		[ -e /sys/class/net/eth0 ] && break
		sleep 0.1
	done
	[ -e /sys/class/net/eth0 ] || fail "no eth0 after loading virtio_net"
fi
for a in "${addrs[@]}"; do
	netcmds+=$'\n'"addr add $a/24 dev $dev"
done
netcmds+=$'\n'"link set $dev up"$'\n'"link set lo up"
ip -batch - <<<"$netcmds" || fail "network setup failed: $netcmds"
rdma link add rxe0 type rxe netdev "$dev" || fail "rdma link add rxe0 type rxe netdev $dev"

port=/sys/class/infiniband/rxe0/ports/1
rxe_ready() { # port ACTIVE, and a GID for each address (IPv4-mapped)
	local state gid want a i found
	read -r state <"$port/state" 2>/dev/null || return 1
	[[ $state == *ACTIVE* ]] || return 1
	for a in "${addrs[@]}"; do
		IFS=. read -r -a o <<<"$a"
		printf -v want '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "${o[@]}"
		found=0
		for i in {0..15}; do
			read -r gid <"$port/gids/$i" 2>/dev/null || continue
			[ "$gid" = "$want" ] && found=1 && break
		done
		[ $found = 1 ] || return 1
	done
}
for _ in {1..200}; do
	rxe_ready && break
	sleep 0.05
done
rxe_ready || fail "rxe0 port not ACTIVE with GIDs for ${addrs[*]} after 10 s"
if [ "$dev" = eth0 ]; then # the carrier comes up a moment after the link
	for _ in {1..100}; do
		read -r state </sys/class/net/eth0/operstate && [ "$state" = up ] && break
		sleep 0.1
	done
	[ "$state" = up ] || fail "eth0 has no carrier after 10 s"
fi

[ -n "${repo:-}" ] || fail "no repository path in params.$node"
mkdir -p "$repo" || fail "mkdir -p $repo"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 repo "$repo" ||
	fail "cannot mount the repository share at $repo"

ulimit -l unlimited
ulimit -n 65536
export HOME=/root USER=root LOGNAME=root SHELL=/bin/bash TERM=dumb LANG=C.UTF-8 \
	TMPDIR=/tmp RSHARE_VM_NODE="$node" RSHARE_VM_NODES="$nodes" RSHARE_VM_DIR="$D"
cd "$repo" || fail "cd $repo"
set +x
exec 2>/dev/console
awk '{print $1}' /proc/uptime >"$D/node$node.booted"
bash "$D/cmd.$node" </dev/null >"$D/node$node.out" 2>"$D/node$node.err"
status=$?
echo "$status" >"$D/node$node.status.tmp"
mv "$D/node$node.status.tmp" "$D/node$node.status"
off
