#!/usr/bin/env bash
# smoke.sh - prove that a guest of tests/vm/run.sh has working RDMA: real
# verbs over Soft-RoCE (rxe) and rdma_cm, and plain rsockets.
#
# Runs INSIDE the guest:
#   tests/vm/run.sh -- bash tests/vm/smoke.sh                     (one guest)
#   tests/vm/run.sh --nodes 2 --node2 'bash tests/vm/smoke.sh' \
#       -- bash tests/vm/smoke.sh                                 (two guests)
#
# Checks, each bounded by a timeout:
#   1. ibv_devices lists rxe0; `rdma link` shows rxe0/1 ACTIVE
#   2. ibv_rc_pingpong (raw verbs, RC QP, GIDs chosen by address)
#   3. rping (rdma_cm connection, RDMA READ/WRITE), 10 rounds
#   4. rstream over rsockets (its own rs_* calls), data verified
#   5. rstream -T s (plain socket calls) under LD_PRELOAD=librspreload.so,
#      plain rsockets; rxe0's packet counter must move, so it is not TCP
# With one guest, servers listen on 10.77.0.1 and clients come from
# 10.77.0.2, both on rxe0 over the dummy netdev rdma0. With two guests,
# node 2 runs the servers (10.77.0.2) and node 1 the clients (10.77.0.1);
# they take turns through files in $RSHARE_VM_DIR, the folder both share.
# Prints one line per check; exits 0 when all pass, else 1 with the
# failing command's output.
set -uo pipefail

node=${RSHARE_VM_NODE:?smoke.sh runs inside a guest of tests/vm/run.sh}
nodes=${RSHARE_VM_NODES:-1}
dir=${RSHARE_VM_DIR:-/run/rshare-vm}
preload=/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so
port=/sys/class/infiniband/rxe0/ports/1
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT

if [ "$nodes" = 1 ]; then
	srv_addr=10.77.0.1 cli_addr=10.77.0.2 role=both
elif [ "$node" = 2 ]; then
	srv_addr=10.77.0.2 cli_addr=10.77.0.1 role=server
else
	srv_addr=10.77.0.2 cli_addr=10.77.0.1 role=client
fi

t0=$(date +%s.%N)
ms() { echo "$(date +%s.%N) $1" | awk '{printf "%d", ($1 - $2) * 1000}'; }
say() { echo "smoke[node$node]: $*"; }
failed=0
fail() {
	say "FAIL: $1"
	shift
	local f
	for f in "$@"; do
		[ -s "$f" ] && sed "s|^|    $(basename "$f"): |" "$f"
	done
	failed=1
}

gid_index() { # ADDR: index of rxe0's RoCE v2 GID for this IPv4 address
	local want i gid
	IFS=. read -r -a o <<<"$1"
	printf -v want '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "${o[@]}"
	for i in {0..15}; do
		read -r gid <"$port/gids/$i" 2>/dev/null || continue
		[ "$gid" = "$want" ] && { echo "$i"; return 0; }
	done
	return 1
}

sent_pkts() { cat "$port/hw_counters/sent_pkts"; }

# Rendezvous for two guests: the server side says "ready.NAME" once its
# server is up (or about to be), the client side says "done.NAME" when done.
mark() { : >"$dir/smoke.$1"; }
await() { # NAME SECS
	local i
	for ((i = 0; i < $2 * 10; i++)); do
		[ -e "$dir/smoke.$1" ] && return 0
		sleep 0.1
	done
	return 1
}

# Start a server in the background; for one guest, return at once (the
# client retries); for two, tell node 1 it may go.
serve() { # NAME CMD...
	local name=$1
	shift
	timeout 60 "$@" >"$log/$name.server" 2>&1 &
	server_pid=$!
	[ "$role" != server ] || { sleep 0.5; mark "ready.$name"; }
}
# Wait for the server to end, and report its failure.
reap() { # NAME
	if ! wait "$server_pid"; then
		fail "$1 server" "$log/$1.server"
		return 1
	fi
}
# Run a client, retried while its server is not listening yet.
client() { # NAME CMD...
	local name=$1
	shift
	[ "$role" != client ] || await "ready.$name" 60 || { fail "$name: node 2 never got its server ready"; return 1; }
	for _ in 1 2 3 4 5 6 7 8 9 10; do
		if timeout 60 "$@" >"$log/$name.client" 2>&1; then
			return 0
		fi
		sleep 0.5
	done
	fail "$name client (10 tries)" "$log/$name.client"
	return 1
}

pair() { # NAME 'SERVER CMD' 'CLIENT CMD' (split on spaces; no quoting)
	local name=$1 t
	local -a s c
	read -r -a s <<<"$2"
	read -r -a c <<<"$3"
	t=$(date +%s.%N)
	case $role in
		both)
			serve "$name" "${s[@]}"
			if ! client "$name" "${c[@]}"; then
				kill "$server_pid" 2>/dev/null
				wait "$server_pid" 2>/dev/null
				return 1
			fi
			reap "$name" || return 1
			;;
		server)
			serve "$name" "${s[@]}"
			reap "$name" || return 1
			await "done.$name" 120 || { fail "$name: node 1 never finished"; return 1; }
			;;
		client)
			client "$name" "${c[@]}" || { mark "done.$name"; return 1; }
			mark "done.$name"
			;;
	esac
	say "ok: $name ($(ms "$t") ms)"
	# The client's figures (absolute numbers mean little under TCG).
	[ ! -s "$log/$name.client" ] ||
		grep -E 'bytes in|iters in|^custom' "$log/$name.client" | sed 's/^/    /'
	return 0
}

# 1. the device
if [ "$role" != server ]; then
	if ibv_devices >"$log/devices" 2>&1 && grep -qw rxe0 "$log/devices"; then
		say "ok: ibv_devices lists rxe0"
	else
		fail "ibv_devices does not list rxe0" "$log/devices"
	fi
	if rdma link >"$log/link" 2>&1 && grep -q 'rxe0/1 state ACTIVE' "$log/link"; then
		say "ok: rdma link: $(head -n 1 "$log/link")"
	else
		fail "rdma link shows no active rxe0" "$log/link"
	fi
fi
[ -e /dev/infiniband/uverbs0 ] && [ -e /dev/infiniband/rdma_cm ] ||
	fail "no /dev/infiniband/uverbs0 or rdma_cm"

sgid=$(gid_index "$srv_addr") cgid=$(gid_index "$cli_addr")
[ "$role" = server ] && cgid=$sgid
[ "$role" = client ] && sgid=$cgid
if [ -z "$sgid" ] || [ -z "$cgid" ]; then
	fail "rxe0 has no GID for our address(es): $(cat "$port"/gids/{0..3} 2>/dev/null | tr '\n' ' ')"
	exit 1
fi

# 2. raw verbs: RC ping-pong, 4 KiB messages (port 18600: not rshare's 18515)
pair ibv_rc_pingpong \
	"ibv_rc_pingpong -d rxe0 -g $sgid -p 18600 -s 4096 -n 200" \
	"ibv_rc_pingpong -d rxe0 -g $cgid -p 18600 -s 4096 -n 200 $srv_addr"

# 3. rdma_cm: rping, 10 verified rounds
pair rping \
	"rping -s -a $srv_addr -p 18601 -C 10 -S 100 -V" \
	"rping -c -a $srv_addr -I $cli_addr -p 18601 -C 10 -S 100 -V"

# 4. rsockets, through rstream's own rs_* calls: 64 KiB x 100, verified
pair rstream \
	"rstream -b $srv_addr -p 18602 -S 65536 -C 100 -T v" \
	"rstream -s $srv_addr -b $cli_addr -p 18602 -S 65536 -C 100 -T v"

# 5. plain rsockets: plain socket calls under librspreload
if [ ! -e "$preload" ]; then
	fail "no $preload"
else
	before=$(sent_pkts)
	pair rstream-preload \
		"env LD_PRELOAD=$preload rstream -T s -T v -b $srv_addr -p 18603 -S 65536 -C 100" \
		"env LD_PRELOAD=$preload rstream -T s -T v -s $srv_addr -b $cli_addr -p 18603 -S 65536 -C 100"
	moved=$(($(sent_pkts) - before))
	if [ "$role" = client ] || [ "$role" = both ]; then
		if [ $moved -gt 100 ]; then
			say "ok: rstream-preload went over rxe0 ($moved packets sent)"
		else
			fail "rstream-preload sent only $moved packets on rxe0: not over RDMA"
		fi
	fi
fi

if [ $failed = 0 ]; then
	say "all checks passed ($(ms "$t0") ms)"
	exit 0
fi
say "some checks failed ($(ms "$t0") ms)"
exit 1
