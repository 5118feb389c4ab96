#!/usr/bin/env bats
# A hub that `rshare run`, `rshare hub start` or the library starts is a
# daemon: it must keep none of the descriptors of the process that started
# it.  A pipe it kept open would keep whoever reads that pipe (a shell's
# $(...), bats' own output) waiting for as long as the hub runs, where the
# same command without rshare returns at once.  Each case runs a command
# with one more descriptor on the pipe of a command substitution, in a
# namespace with no hub, first without rshare and then with it, and the
# substitution must return, with the command's output, both times.

load lib

setup() {
	rs_require
	rs_setup
	rs_netns "$NS_A"
}

teardown() {
	rs_teardown
}

# through NS CMD...: what CMD printed, read through $(...) with the pipe on
# descriptors 1 and 5 of CMD; "blocked" when it did not return in 10 s
through() {
	local ns=$1 out
	shift
	out=$(ip netns exec "$ns" timeout -k 1 20 bash -c '
		exec 5>&1
		timeout -k 1 10 bash -c "out=\$(\"\$@\" 5>&1); echo \"returned: \$out\"" _ "$@" ||
			echo "blocked ($?)"' _ "$@" 5>&-)
	echo "$out"
}

hub_up() {
	rs_stat "$NS_A" 2>/dev/null | jq -se '.[0].pid > 0' >/dev/null
}

@test "rshare run that starts the hub: a reader of the program's output gets its end, as without rshare" {
	local plain pre
	hub_up && rs_fail "a hub answers before anything started one"
	plain=$(through "$NS_A" echo hello)
	pre=$(through "$NS_A" "$RSHARE" run -- echo hello)
	echo "without: $plain; with: $pre"
	[[ $plain == "returned: hello" ]]
	hub_up || rs_fail "rshare run started no hub"
	[[ $pre == "$plain" ]]
}

@test "rshare hub start: a reader of its output gets its end" {
	local out
	hub_up && rs_fail "a hub answers before anything started one"
	out=$(through "$NS_A" sh -c '"$1" hub start >/dev/null && echo started' _ "$RSHARE")
	echo "$out"
	hub_up || rs_fail "rshare hub start started no hub"
	[[ $out == "returned: started" ]]
}

@test "a preloaded listen() that starts the hub: a reader of the program's output gets its end, as without rshare" {
	local prog plain pre
	command -v python3 >/dev/null || skip "needs python3"
	prog='import socket; s = socket.socket(); s.bind(("127.0.0.1", 7016)); s.listen(); print("listened")'
	hub_up && rs_fail "a hub answers before anything started one"
	plain=$(through "$NS_A" python3 -c "$prog")
	pre=$(through "$NS_A" env LD_PRELOAD="$RS_BUILD/librshare.so" python3 -c "$prog")
	echo "without: $plain; with: $pre"
	[[ $plain == "returned: listened" ]]
	rs_retry 5 hub_up || rs_fail "the library started no hub"
	[[ $pre == "$plain" ]]
}
