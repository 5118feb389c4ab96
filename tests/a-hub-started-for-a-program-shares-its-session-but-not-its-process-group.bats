#!/usr/bin/env bats
# A hub that the library or `rshare run` starts (core/proc/hub_spawn.c)
# stays in the session of the program that started it, in a process group
# of its own.  The session is what the scheduler groups processes by where
# autogroups are on (sched_autogroup_enabled, Debian's default): a hub in
# a session of its own was a group of its own, the programs' spins could
# not yield to it nor its spin to them, and on 2 processors a client and a
# thread-per-connection server of one shell made about half the
# connections a second.  Its process group is its own, so that what the
# shell or a supervisor sends the program's group (Ctrl-C, a hang-up, a
# kill of the group) does not reach it, and it outlives the program, its
# group and its session, and a hang-up of the terminal they ran on.  `rshare hub start`, asked for by name, still
# makes a session of its own (rshare-command-hub.bats).

load lib

setup() {
	rs_require
	rs_setup
	rs_netns "$NS_A"
	# the program each case starts: it writes its pid, then runs under
	# rshare run, which starts the hub
	prog_cmd="echo \$\$ >'$RS_TMP/prog.pid'; exec '$RSHARE' run -- sleep 30"
}

teardown() {
	rs_teardown
}

# ids PID: its session, process group and, where the kernel has them, its
# autogroup
ids() {
	local ag=none
	[[ -r /proc/$1/autogroup ]] && ag=$(cut -d' ' -f1 "/proc/$1/autogroup")
	echo "sid $(ps -o sid= -p "$1" | tr -d ' ') pgid $(ps -o pgid= -p "$1" | tr -d ' ') autogroup $ag"
}

# hub_pids: the hub's processes in NS_A (its warden and its loop)
hub_pids() {
	local st
	st=$(rs_stat "$NS_A") || return 1
	jq -r '.pid, .hub_pid' <<<"$st" | sort -u
}

# started: once the program of prog_cmd wrote its pid and its hub answers,
# that pid in $prog and the hub's processes in $before (the case's locals)
started() {
	rs_wait_file "$RS_TMP/prog.pid" '^[0-9]+$' 1 10 || rs_fail "the program did not start" || return
	prog=$(<"$RS_TMP/prog.pid")
	rs_retry 10 hub_pids >/dev/null || rs_fail "rshare run started no hub" || return
	before=$(hub_pids)
}

gone() { ! kill -0 "$1" 2>/dev/null; }

# outlived WHAT: the program ($prog) ends within 10 s of WHAT, and the hub
# of $before still answers
outlived() {
	local after
	rs_retry 10 gone "$prog" || rs_fail "the program outlived $1" || return
	after=$(hub_pids) || rs_fail "the hub is gone with $1" || return
	echo "hub before: $before; after: $after"
	[[ $after == "$before" ]] || rs_fail "another hub answers"
}

@test "a hub that rshare run starts is in the program's session and autogroup, in a process group of its own" {
	local prog before p want got
	# the program leads a session of its own, as one started from a shell
	# or a supervisor does
	ip netns exec "$NS_A" setsid timeout -k 5 60 bash -c "$prog_cmd" </dev/null >/dev/null 2>&1 &
	started
	read -r -a want <<<"$(ids "$prog")"
	echo "program $prog: ${want[*]}"
	for p in $(hub_pids); do
		read -r -a got <<<"$(ids "$p")"
		echo "hub $p: ${got[*]}"
		[[ ${got[1]} == "${want[1]}" ]] || rs_fail "the hub's session is ${got[1]}, the program's ${want[1]}"
		[[ ${got[5]} == "${want[5]}" ]] || rs_fail "the hub's autogroup is ${got[5]}, the program's ${want[5]}"
		[[ ${got[3]} != "${want[3]}" ]] || rs_fail "the hub is in the program's process group"
	done
}

@test "a hub started so outlives what is sent to the program's process group, and the program's session" {
	local prog before group
	ip netns exec "$NS_A" setsid timeout -k 5 60 bash -c "$prog_cmd" </dev/null >/dev/null 2>&1 &
	started
	group=$(ps -o pgid= -p "$prog" | tr -d ' ')
	# what a shell sends its job on Ctrl-C and on a hang-up, then a kill;
	# the group's leader leads the session too (setsid)
	kill -INT -- "-$group" 2>/dev/null || true
	kill -HUP -- "-$group" 2>/dev/null || true
	kill -KILL -- "-$group" 2>/dev/null || true
	outlived "its group's kill"
}

@test "a hub started so outlives the hang-up of the terminal its program ran on" {
	local term prog before
	command -v script >/dev/null || skip "needs script (util-linux)"
	# script gives the program a terminal of its own (a pseudo-terminal that
	# it leads the session of); killing script hangs that terminal up
	ip netns exec "$NS_A" script -qfc "$prog_cmd" /dev/null </dev/null >/dev/null 2>&1 &
	term=$!
	started
	[[ $(ps -o tty= -p "$prog" | tr -d ' ') == pts/* ]] || rs_fail "the program has no terminal"
	kill -KILL "$term"
	outlived "its terminal's hang-up"
}
