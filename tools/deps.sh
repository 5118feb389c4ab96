#!/usr/bin/env bash
# deps.sh - install what building and testing rshare need on Debian 12.
#
# Installs only the packages that are missing, runs `apt-get update` at most
# once and only when something has to be installed, prints nothing when all
# is present, and exits nonzero when a package cannot be installed.
set -euo pipefail

pkgs=(
	build-essential # gcc, make, libc headers
	libibverbs-dev  # the verbs transport
	librdmacm-dev   # rdma_cm, for the verbs transport
	libunwind-dev   # the hub's backtrace on a fatal signal
	bats            # test scripts
	jq              # reading `rshare stat --json` in tests
	iproute2        # ip netns, veth, ss
	procps          # ps, pgrep
	psmisc          # fuser, killall
	man-db          # man --warnings
	groff-base      # man page formatting
	valgrind        # tests/hub-clean-under-valgrind.bats
	gdb             # tests/hub-killed-*.bats: a hub killed as a read returns
	libtsan2        # gcc's ThreadSanitizer runtime: make TSAN=1, tests/threads-race-free-under-tsan.bats
	qemu-system-x86 # tests/vm: Soft-RoCE guests (TCG)
	debootstrap     # tests/vm/image.sh: the guest's root filesystem
	e2fsprogs       # tests/vm/image.sh: mkfs.ext4 -d
	util-linux      # tests/vm: flock, setpriv; taskset (tests/waiters-for-the-hub-*)
	strace          # system calls counted: tests/same-node-connections-*, tests/waiters-for-the-hub-*
	xz-utils        # tests/vm/image.sh: unpacks the guest kernel
	binutils        # tests/vm/image.sh: readelf
	clang           # make fuzz: libFuzzer targets (tests/fuzz)
	# real servers and benchmarks on two nodes (tests/*-over-rshare.bats);
	# installed without starting their services (policy-rc.d below)
	nginx           # tests/nginx-under-wrk-and-curl-over-rshare.bats
	wrk             # its load
	curl            # its content checks
	apache2         # tests/apache-prefork-under-ab-over-rshare.bats (prefork MPM)
	apache2-utils   # ab
	postgresql      # tests/postgresql-under-pgbench-over-rshare.bats: postgres, initdb, pgbench
	memcached       # tests/memcached-under-memcslap-over-rshare.bats
	libmemcached-tools # memcslap, memccp, memccat
	redis-server    # tests/redis-under-redis-benchmark-over-rshare.bats
	redis-tools     # redis-benchmark, redis-cli
	sockperf        # tests/bench/suite.sh: an independent latency client
	iperf3          # tests/bench/suite.sh: parallel streams (-P 4)
	socat           # tests/large-writes-before-reads-finish-as-on-kernel-tcp.bats: a fork-per-connection server (fork, EXEC)
	gnuplot-nox     # tests/bench/suite.sh: its plots
	# sockets that move between processes
	nodejs          # tests/node-cluster-serves-over-rshare.bats: cluster, both policies
	python3         # tests/bench/churn.sh: an asyncio echo client and server
	haproxy         # tests/haproxy-seamless-reload-under-load-over-rshare.bats (-x, -sf)
	openssh-server  # tests/sshd-reexec-privsep-serves-over-rshare.bats: re-exec, chroot, seccomp
	openssh-client  # ssh, ssh-keygen
	gunicorn        # tests/listeners-handed-over-stay-rshare-listeners.bats: socket activation
	systemd         # systemd-socket-activate
	liburing-dev    # tests/uring-echo-server.c: a program whose socket I/O is io_uring's
)

installed() {
	dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q '^install ok installed$'
}

missing=()
for p in "${pkgs[@]}"; do
	installed "$p" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if ! command -v apt-get >/dev/null 2>&1; then
	echo "deps.sh: missing ${missing[*]} and no apt-get to install them" >&2
	exit 1
fi

as_root=()
if [ "$(id -u)" -ne 0 ]; then
	if command -v sudo >/dev/null 2>&1; then
		as_root=(sudo -n)
	else
		echo "deps.sh: missing ${missing[*]}; run as root to install them" >&2
		exit 1
	fi
fi

export DEBIAN_FRONTEND=noninteractive
echo "deps.sh: installing ${missing[*]}" >&2
log=$(mktemp)
# No package may start its service (the tests start their own servers in
# network namespaces): where no policy-rc.d says otherwise, one that denies
# every start stays in place while apt-get runs.
policy=
if [ ! -e /usr/sbin/policy-rc.d ]; then
	policy=/usr/sbin/policy-rc.d
	printf '#!/bin/sh\n# deps.sh: no service starts while it installs\nexit 101\n' |
		"${as_root[@]}" tee "$policy" >/dev/null
	"${as_root[@]}" chmod 755 "$policy"
fi
trap 'rm -f "$log"; [ -z "$policy" ] || "${as_root[@]}" rm -f "$policy"' EXIT
if ! "${as_root[@]}" apt-get -qq update >"$log" 2>&1 ||
	! "${as_root[@]}" apt-get -qq -y --no-install-recommends install "${missing[@]}" >>"$log" 2>&1; then
	cat "$log" >&2
	echo "deps.sh: could not install ${missing[*]}" >&2
	exit 1
fi

for p in "${missing[@]}"; do
	if ! installed "$p"; then
		echo "deps.sh: $p is still not installed" >&2
		exit 1
	fi
done
