#!/usr/bin/env bats
# A hub that the library or `rshare run` starts serves every program of
# the node, not only the one that happened to start it, so it takes none
# of what was set for that program alone (core/proc/hub_spawn.c): its
# processor affinity (a hub pinned to the one processor a program was
# given would share it with that program and leave the others), its
# scheduling policy and nice value, and its lowered resource limits
# (processor time, file size, data, address space, resident set, locked
# memory: a hub that inherited `ulimit -t` would be killed every so many
# seconds).  Each case starts the hub of a fresh namespace from a program
# run under taskset, nice, chrt and prlimit, and the hub (the warden and
# the hub's process) must read back as one that `rshare hub start` started
# from a plain shell in another namespace.  A hard limit the caller may not
# raise (root without CAP_SYS_RESOURCE, as in some containers) stays, the
# soft one goes up to it.  `rshare hub start`, asked for by name, keeps
# what its caller chose.  A hub under a file size limit it may not raise
# cannot size its arenas: it says so in its log and stays up, and the
# program runs on kernel TCP, where the signal of that limit used to kill
# the hub and each of its successors.

load lib

setup() {
	rs_require
	command -v taskset >/dev/null && command -v chrt >/dev/null && command -v prlimit >/dev/null ||
		skip "needs taskset, chrt and prlimit (util-linux)"
	rs_setup
	rs_netns "$NS_A"
	rs_netns "$NS_B"
}

teardown() {
	rs_teardown
}

# wrapped CMD...: CMD on processor 0, nice 7, SCHED_BATCH, with soft limits
# lowered and the processor time lowered hard (a hub that inherited it
# would be killed after so many seconds of work); the address space and
# data too, but not in the sanitizer pass, whose AddressSanitizer maps
# terabytes
wrapped() {
	local mem=(--as=8000000000:unlimited --data=4000000000:unlimited)
	[[ -z ${ASAN_OPTIONS:-} ]] || mem=()
	taskset -c 0 nice -n 7 chrt -b 0 prlimit --cpu=300:300 --fsize=1000000:unlimited \
		--rss=100000000:unlimited --memlock=65536: "${mem[@]}" "$@"
}

# hub_reads NS: the affinity, nice value, policy and limits of the hub of
# NS, its warden's and its loop's process, a line each
hub_reads() {
	local st p
	st=$(rs_stat "$1") || return 1
	for p in $(jq -r '.pid, .hub_pid' <<<"$st" | sort -u); do
		echo "$(grep Cpus_allowed_list "/proc/$p/status" | tr -s '\t ' ' ')" \
			"$(awk '{print "nice", $19, "policy", $41}' "/proc/$p/stat")" \
			"$(grep -E '^Max (cpu time|file size|data size|address space|resident set|locked memory)' \
				"/proc/$p/limits" | tr -s ' ' | tr '\n' ';')"
	done
}

# may_raise: whether this caller may raise a hard limit
may_raise() {
	prlimit --cpu=300:300 prlimit --cpu=unlimited:unlimited true 2>/dev/null
}

# want: into ref, the reference hub's lines, the processor time limit kept
# where it cannot go up (not in a $(...), so that its failures fail the test)
want() {
	ip netns exec "$NS_B" "$RSHARE" hub start >/dev/null || rs_fail "rshare hub start" || return
	ref=$(hub_reads "$NS_B") || rs_fail "no reference hub" || return
	if ! may_raise; then
		ref=$(sed -E 's/Max cpu time [^;]*;/Max cpu time 300 300 seconds ;/' <<<"$ref")
	fi
}

@test "a hub that rshare run starts takes none of the program's affinity, policy, nice value or lowered limits" {
	local ref got
	want
	ip netns exec "$NS_A" timeout 20 bash -c "$(declare -f wrapped); wrapped \"\$@\"" _ "$RSHARE" run -- true ||
		rs_fail "rshare run under taskset, nice, chrt and prlimit"
	got=$(hub_reads "$NS_A") || rs_fail "rshare run started no hub"
	echo "reference: $ref"
	echo "started so: $got"
	[[ $got == "$ref" ]] || rs_fail "the hub differs from one started from a plain shell"
}

@test "a hub that a preloaded listen() starts takes none of the program's affinity, policy, nice value or lowered limits" {
	local ref got prog
	command -v python3 >/dev/null || skip "needs python3"
	prog='import socket; s = socket.socket(); s.bind(("127.0.0.1", 7031)); s.listen(); print("listened")'
	want
	ip netns exec "$NS_A" timeout 20 bash -c "$(declare -f wrapped); wrapped \"\$@\"" _ \
		env LD_PRELOAD="$RS_BUILD/librshare.so" python3 -c "$prog" || rs_fail "the program failed"
	rs_retry 5 hub_reads "$NS_A" >/dev/null || rs_fail "the library started no hub"
	got=$(hub_reads "$NS_A")
	echo "reference: $ref"
	echo "started so: $got"
	[[ $got == "$ref" ]] || rs_fail "the hub differs from one started from a plain shell"
}

@test "rshare hub start keeps the affinity and nice value it was started with" {
	local got
	ip netns exec "$NS_A" taskset -c 0 nice -n 7 "$RSHARE" hub start >/dev/null || rs_fail "rshare hub start"
	got=$(hub_reads "$NS_A")
	echo "$got"
	[[ $got == *"Cpus_allowed_list: 0 nice 7 "* ]] || rs_fail "the hub took another affinity or nice value"
}

@test "a hub under a file size limit it may not raise turns pools away with a clear error, stays up, and the program runs as on kernel TCP" {
	local prog plain pre n
	command -v python3 >/dev/null || skip "needs python3"
	prog='import socket
l = socket.socket(); l.bind(("127.0.0.1", 7041)); l.listen()
c = socket.create_connection(("127.0.0.1", 7041)); a, _ = l.accept()
c.sendall(b"ping"); print(a.recv(4).decode())'
	plain=$(ip netns exec "$NS_B" timeout 20 python3 -c "$prog")
	pre=$(ip netns exec "$NS_A" timeout 20 prlimit --fsize=100000:100000 \
		env RSHARE_HUB_LOG="$RS_TMP/hub.log" "$RSHARE" run -- python3 -c "$prog")
	cat "$RS_TMP/hub.log"
	[[ $plain == ping && $pre == "$plain" ]] || rs_fail "kernel TCP: '$plain', rshare: '$pre'"
	n=$(rs_stat "$NS_A" | jq .counters.local_connects) || rs_fail "the hub is gone"
	! grep -q "died of signal" "$RS_TMP/hub.log" || rs_fail "the hub died"
	if may_raise; then
		((n == 1)) || rs_fail "the hub raised its limit, yet counted $n same-node connections"
	else
		grep -q "cannot create an arena.*RLIMIT_FSIZE" "$RS_TMP/hub.log" || rs_fail "no error that names the limit"
		((n == 0)) || rs_fail "$n same-node connections without an arena"
	fi
}
