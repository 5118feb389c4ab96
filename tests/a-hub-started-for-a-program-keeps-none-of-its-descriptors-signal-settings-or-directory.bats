#!/usr/bin/env bats
# A hub that `rshare run`, `rshare hub start` or the library starts is a
# daemon: it must keep nothing of the process that started it beyond its
# environment.
#
# Descriptors.  A pipe it kept open would keep whoever reads that pipe (a
# shell's $(...), bats' own output) waiting for as long as the hub runs,
# where the same command without rshare returns at once.  Each case runs a
# command with one more descriptor on the pipe of a command substitution,
# in a namespace with no hub, first without rshare and then with it, and
# the substitution must return, with the command's output, both times.
#
# Signals.  An exec keeps blocked and ignored signals, and a hub with
# SIGTERM or SIGUSR2 blocked would neither stop (`rshare hub stop`) nor
# restart (`rshare hub restart`).  Servers that take their signals through
# a signalfd block them, and shell scripts ignore them with `trap ''`.
# Each case starts the hub of a fresh namespace that way, then restarts
# and stops it, as with a hub started from a plain shell.
#
# The working directory.  A hub that stayed in the directory it was
# started from would keep it busy: a file system the program ran in could
# not be unmounted after it ended.

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

# restart_and_stop: the hub of NS_A restarts, then stops
restart_and_stop() {
	local pid
	pid=$(rs_stat "$NS_A" | jq .pid)
	[[ $pid -gt 0 ]] || rs_fail "no hub answers"
	grep -E '^Sig(Blk|Ign)' "/proc/$pid/status"
	run ip netns exec "$NS_A" timeout 30 "$RSHARE" hub restart
	echo "restart: $status: $output"
	[[ $status -eq 0 ]] || rs_fail "the hub did not restart"
	run ip netns exec "$NS_A" timeout 30 "$RSHARE" hub stop
	echo "stop: $status: $output"
	[[ $status -eq 0 ]] || rs_fail "the hub did not stop"
	! rs_stat "$NS_A" >/dev/null 2>&1 || rs_fail "a hub still answers"
}

@test "a hub that a preloaded listen() starts, in a program with SIGTERM, SIGINT and SIGUSR2 blocked and SIGTERM ignored, restarts and stops" {
	command -v python3 >/dev/null || skip "needs python3"
	run ip netns exec "$NS_A" timeout 20 env LD_PRELOAD="$RS_BUILD/librshare.so" python3 -c '
import signal, socket
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT, signal.SIGUSR2})
signal.signal(signal.SIGTERM, signal.SIG_IGN)
s = socket.socket(); s.bind(("127.0.0.1", 7021)); s.listen(); print("listened")'
	echo "$output"
	[[ $status -eq 0 && $output == listened ]]
	rs_retry 5 hub_up || rs_fail "the library started no hub"
	restart_and_stop
}

@test "a hub that rshare hub start starts, run with SIGTERM, SIGINT and SIGUSR2 blocked and ignored (a signalfd server's child, trap ''), restarts and stops" {
	command -v python3 >/dev/null || skip "needs python3"
	run ip netns exec "$NS_A" timeout 20 python3 -c '
import os, signal, sys
sigs = {signal.SIGTERM, signal.SIGINT, signal.SIGUSR2}
signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
for s in sigs:
    signal.signal(s, signal.SIG_IGN)
os.execv(sys.argv[1], [sys.argv[1], "hub", "start"])' "$RSHARE"
	echo "$output"
	[[ $status -eq 0 ]]
	restart_and_stop
}

# in_mount NS [CMD...]: in NS, mount a tmpfs, run CMD (if any) in it, leave
# it and unmount it; what umount said
in_mount() {
	local ns=$1
	shift
	ip netns exec "$ns" timeout 20 bash -c '
		d=$(mktemp -d) && mount -t tmpfs none "$d" && cd "$d" || exit 1
		"$@"
		cd /
		umount "$d" 2>&1 && echo "unmounted"
		rmdir "$d" 2>/dev/null
		true' _ "$@"
}

@test "a directory rshare run was started in (the hub with it) unmounts after the program ends, as without rshare" {
	local plain pre
	plain=$(in_mount "$NS_A" true)
	pre=$(in_mount "$NS_A" "$RSHARE" run -- true)
	echo "without: $plain; with: $pre"
	[[ $plain == unmounted ]]
	hub_up || rs_fail "rshare run started no hub"
	[[ $pre == "$plain" ]]
}
