#!/usr/bin/env bash
# tests/soak.sh - the soak: many processes, many connections, random worker
# kills, every byte checked, the hubs' memory watched.  `make soak` runs it;
# tests/soak-short.bats runs a short variant.
#
# Two nodes (network namespaces, as the Bats tests make them, with a hub
# each).  Node A: respawn-server, a pre-fork echo server whose master forks
# a new worker whenever one dies.  Node B: soak-client processes, each
# holding its share of the connections, sending messages of random size and
# checking every echoed byte, reconnecting after a reset.  Every SOAK_KILL_MS
# or so (at random) one worker is killed with SIGKILL; the connections it
# held are reset (or end, with EOF, where it had read everything: the
# kernel's FIN for a dead process's socket; soak-client -E counts those as
# resets) and their clients connect again.  The hubs' VmRSS is
# sampled after the warm-up (every connection up, then a fifth of the run)
# and at the end of the traffic.
#
# Settings (environment):
#   SOAK_SECS     120    seconds of traffic
#   SOAK_CONNS    2000   concurrent connections
#   SOAK_PROCS    64     processes: SOAK_WORKERS server workers, the rest clients
#   SOAK_WORKERS  PROCS/4
#   SOAK_KILL_MS  2000   mean time between worker kills (0: no kills)
#   SOAK_MAXSIZE  65536  largest message
#   SOAK_RING     32768  the server's SO_RCVBUF/SO_SNDBUF (rings twice that)
#   SOAK_SEED     random
#   SOAK_TMP      where the logs go (default: a temp dir, removed if it passes)
#
# Fails (exit 1) when a byte was corrupted, a connection ended without a
# reset (EOF mid-echo, any other error), the clients saw another number of
# resets than the connections the killed workers held (the hub's log says
# how many each held), traffic fell back to kernel TCP, or a hub's RSS at the
# end is more than twice the post-warm-up sample plus 8 MiB.  The last lines
# printed are the totals.

set -u
cd "$(dirname "$0")/.."
# shellcheck source=tests/lib.bash
source tests/lib.bash

SECS=${SOAK_SECS:-120}
CONNS=${SOAK_CONNS:-2000}
PROCS=${SOAK_PROCS:-64}
WORKERS=${SOAK_WORKERS:-$((PROCS / 4))}
CLIENTS=$((PROCS - WORKERS))
KILL_MS=${SOAK_KILL_MS:-2000}
MAXSIZE=${SOAK_MAXSIZE:-65536}
RING=${SOAK_RING:-32768}
SEED=${SOAK_SEED:-$RANDOM}
PORT=${SOAK_PORT:-7601}
WARMUP=$((SECS / 5 > 3 ? SECS / 5 : 3))

say() { echo "soak: $*"; }
die() {
	echo "soak: FAIL: $*" >&2
	exit 1
}

[[ $EUID -eq 0 ]] || die "needs root (network namespaces)"
for c in ip jq pgrep; do
	command -v $c >/dev/null || die "needs $c"
done
for f in "$RSHARE" "$RSHARED" "$RS_BUILD/librshare.so" "$RS_BIN/respawn-server" "$RS_BIN/soak-client"; do
	[[ -x $f || -f $f ]] || die "$f not built (make all)"
done
((WORKERS >= 2 && CLIENTS >= 1 && CONNS >= CLIENTS && SECS >= 5)) ||
	die "bad settings: $WORKERS workers, $CLIENTS client processes, $CONNS connections, $SECS s"

# ---- the hub's limits, before anything starts ----
# A pool (one per process tree: the whole server is one, each client
# process one) has 4096 socket slots and 256 MiB of receive rings and as
# much of send rings (arena 512 MiB).  Leave a quarter free on the server
# for the sockets of killed workers that are still being reset.
ring_size() { # the ring for SO_RCVBUF/SO_SNDBUF v, as the library sizes it
	local s=4096 want=$(($1 * 2))
	while ((s < want && s < 4194304)); do s=$((s * 2)); done
	echo $s
}
SRV_RING=$(ring_size "$RING")
CLI_RING=131072
PER_CLIENT=$(((CONNS + CLIENTS - 1) / CLIENTS))
srv_cap=$((268435456 / SRV_RING < 4096 ? 268435456 / SRV_RING : 4096))
cli_cap=$((268435456 / CLI_RING < 4096 ? 268435456 / CLI_RING : 4096))
((CONNS + CONNS / 4 + 1 <= srv_cap)) ||
	die "the server's pool holds $srv_cap connections of $SRV_RING-byte rings; $CONNS and a quarter more do not fit (lower SOAK_RING or SOAK_CONNS)"
((PER_CLIENT + 1 <= cli_cap)) ||
	die "a client pool holds $cli_cap connections of 128 KiB rings; $PER_CLIENT per process do not fit (raise SOAK_PROCS)"
nofile=$(ulimit -n)
((nofile >= PER_CLIENT + 64 && nofile >= CONNS / WORKERS * 2 + 64 && nofile >= PROCS * 4 + 64)) ||
	die "ulimit -n $nofile is too low for $PER_CLIENT connections per client, $((CONNS / WORKERS)) per worker, $PROCS processes per hub"
need_mb=$((CONNS * (2 * CLI_RING + 2 * SRV_RING + 256 * 1024) / 1048576 + 256))
avail_mb=$(($(sed -n 's/^MemAvailable: *\([0-9]*\) kB/\1/p' /proc/meminfo) / 1024))
((avail_mb >= need_mb * 2)) || die "$avail_mb MiB available, this run may touch $need_mb MiB: too tight"
threads=$(($(cat /proc/sys/kernel/threads-max) < $(cat /proc/sys/kernel/pid_max) ? $(cat /proc/sys/kernel/threads-max) : $(cat /proc/sys/kernel/pid_max)))
((threads >= 2 * CONNS + 2 * PROCS + 1000)) || die "$threads threads/pids allowed; the run needs about $((2 * CONNS + 2 * PROCS))"
say "limits: server pool $CONNS of $srv_cap connections ($SRV_RING-byte rings), client pools $PER_CLIENT of $cli_cap, ulimit -n $nofile, ~$need_mb of $avail_mb MiB"

# ---- two nodes ----
# logs in SOAK_TMP if set, else in a temp dir removed after a passing run
[[ -n ${SOAK_TMP:-} ]] && BATS_TEST_TMPDIR=$SOAK_TMP
rs_setup
# (the tails of the logs only when it failed)
trap 'rc=$?; if ((rc)); then rs_teardown; else rs_teardown 2>/dev/null; fi
	[[ $rc -ne 0 || -n ${SOAK_TMP:-} ]] || rm -rf "$RS_TMP"' EXIT
trap 'exit 143' TERM INT
echo "$NS_A $NS_B" >"$RS_TMP/nodes"
RS_BG_TIMEOUT=$((SECS + 300))
rs_two_nodes || die "could not make the two nodes"
say "seed $SEED; nodes $NS_A (server, $WORKERS workers) and $NS_B ($CLIENTS client processes, $CONNS connections); $SECS s; $( ((KILL_MS > 0)) && echo "a kill every ~$KILL_MS ms" || echo "no kills"); logs in $RS_TMP"
RANDOM=$SEED

hub_pid() { rs_stat "$1" | jq -r .pid; }
rss_kb() { awk '$1 == "VmRSS:" { print $2 }' "/proc/$1/status"; }
HUB_A=$(hub_pid "$NS_A")
HUB_B=$(hub_pid "$NS_B")
[[ -n $HUB_A && -n $HUB_B ]] || die "no hub pids"
say "hub RSS at the start: A $(rss_kb "$HUB_A") kB, B $(rss_kb "$HUB_B") kB"

rs_bg server "$NS_A" --rshare "$RS_BIN/respawn-server" -w "$WORKERS" -b "$RING" $PORT
rs_wait_ready server 30 || die "the server did not start: $(cat "$RS_TMP/server.err")"
MASTER=$(sed -n 's/^master //p' "$RS_TMP/server.out")
[[ -n $MASTER ]] || die "no master pid"

start=$SECONDS
cpids=()
left=$CONNS
for ((i = 0; i < CLIENTS; i++)); do
	n=$((left / (CLIENTS - i)))
	left=$((left - n))
	rs_bg client$i "$NS_B" --rshare "$RS_BIN/soak-client" -c $n -t "$SECS" -m "$MAXSIZE" \
		-s $((SEED * 1000 + i)) -E -R "$RS_TMP/up.$i" $ADDR_A $PORT
	cpids+=("$RS_LASTPID")
done

alive() {
	local p
	for p in "${cpids[@]}"; do
		kill -0 "$p" 2>/dev/null && return 0
	done
	return 1
}

kills=0
next_kill() { # ms until the next kill: uniform in [KILL_MS/2, 3*KILL_MS/2)
	echo $((KILL_MS / 2 + (RANDOM * 32768 + RANDOM) % (KILL_MS > 0 ? KILL_MS : 1)))
}
kill_one() {
	local ws
	mapfile -t ws < <(pgrep -P "$MASTER")
	((${#ws[@]})) || return 0
	kill -KILL "${ws[RANDOM % ${#ws[@]}]}" 2>/dev/null && kills=$((kills + 1))
}

# warm-up: every connection up, then WARMUP seconds
for ((t = 0; t < 600; t++)); do
	[[ $(ls "$RS_TMP"/up.* 2>/dev/null | wc -l) -ge $CLIENTS ]] && break
	alive || break
	sleep 0.1
done
[[ $(ls "$RS_TMP"/up.* 2>/dev/null | wc -l) -ge $CLIENTS ]] ||
	die "only $(ls "$RS_TMP"/up.* 2>/dev/null | wc -l) of $CLIENTS client processes got all their connections up"
say "all $CONNS connections up after $((SECONDS - start)) s"

now_ms() { echo $(($(date +%s%N) / 1000000)); }
t0=$(now_ms)
end_ms=$((t0 + (SECS - (SECONDS - start)) * 1000))
warm_at=$((t0 + WARMUP * 1000))
kill_at=$((KILL_MS > 0 ? t0 + $(next_kill) : end_ms + 1))
rss_warm_a= rss_warm_b= rss_end_a= rss_end_b=
while alive; do
	now=$(now_ms)
	if [[ -z $rss_warm_a ]] && ((now >= warm_at)); then
		rss_warm_a=$(rss_kb "$HUB_A") rss_warm_b=$(rss_kb "$HUB_B")
		say "hub RSS after warm-up: A $rss_warm_a kB, B $rss_warm_b kB ($kills kills so far)"
	fi
	# the end sample: the last second of traffic, every connection still busy
	if [[ -z $rss_end_a ]] && ((now >= end_ms - 1500)); then
		rss_end_a=$(rss_kb "$HUB_A") rss_end_b=$(rss_kb "$HUB_B")
	fi
	if ((now >= kill_at && now < end_ms - 2000)); then
		kill_one
		kill_at=$((now + $(next_kill)))
	fi
	sleep 0.05
done
[[ -n $rss_warm_a && -n $rss_end_a ]] || die "the clients ended after $((SECONDS - start)) s, before both RSS samples (warm-up ${rss_warm_a:-none}, end ${rss_end_a:-none})"

# ---- the totals ----
fails=()
bytes=0 opened=0 resets=0 msgs=0 corrupt=0 lost=0 errors=0 reported=0
for ((i = 0; i < CLIENTS; i++)); do
	wait "${cpids[$i]}"
	rc=$?
	line=$(grep '^soak-client ' "$RS_TMP/client$i.out")
	if [[ $line =~ opened=([0-9]+)\ resets=([0-9]+)\ bytes=([0-9]+)\ msgs=([0-9]+)\ corrupt=([0-9]+)\ lost=([0-9]+)\ errors=([0-9]+) ]]; then
		reported=$((reported + 1))
		opened=$((opened + BASH_REMATCH[1])) resets=$((resets + BASH_REMATCH[2]))
		bytes=$((bytes + BASH_REMATCH[3])) msgs=$((msgs + BASH_REMATCH[4]))
		corrupt=$((corrupt + BASH_REMATCH[5])) lost=$((lost + BASH_REMATCH[6])) errors=$((errors + BASH_REMATCH[7]))
	fi
	if ((rc != 0)); then
		fails+=("client$i exit $rc: $(tail -n 3 "$RS_TMP/client$i.err" | xargs)")
	fi
done
rs_stat "$NS_A" >"$RS_TMP/a-end.json"
rs_stat "$NS_B" >"$RS_TMP/b-end.json"
rss_close_a=$(rss_kb "$HUB_A") rss_close_b=$(rss_kb "$HUB_B")
# what the killed workers held, by the hub's log ("process P gone holding N
# sockets": N counts the listener too)
held_by_killed=$(grep -F " gone holding " "$RS_TMP/hub-$NS_A.err" |
	sed -n 's/.*process \([0-9]*\) gone holding \([0-9]*\) sockets.*/\1 \2/p' |
	while read -r p n; do
		grep -qx "died $p status 0x9" "$RS_TMP/server.out" && echo $((n - 1))
	done | awk '{ s += $1 } END { print s + 0 }')
respawns=$(grep -c '^respawn ' "$RS_TMP/server.out")
fb_a=$(jq .counters.fallback_connects "$RS_TMP/a-end.json")
fb_b=$(jq .counters.fallback_connects "$RS_TMP/b-end.json")
link_total=$(jq '[.links[].connections_total] | add // 0' "$RS_TMP/a-end.json")
link_rx=$(jq '[.links[].bytes_rx] | add // 0' "$RS_TMP/a-end.json")

((reported == CLIENTS)) || fails+=("$((CLIENTS - reported)) client processes printed no totals")
((corrupt == 0)) || fails+=("$corrupt corrupted bytes/streams")
((lost == 0)) || fails+=("$lost connections lost without a reset")
((errors == 0)) || fails+=("$errors connections failed otherwise")
((respawns == kills)) || fails+=("$kills kills, $respawns workers respawned")
((resets == held_by_killed)) ||
	fails+=("the clients saw $resets resets; the killed workers held $held_by_killed connections")
((kills > 0 || resets == 0)) || fails+=("$resets resets without a kill")
drops_a=$(jq '.counters.links_dropped + .counters.malformed' "$RS_TMP/a-end.json")
drops_b=$(jq '.counters.links_dropped + .counters.malformed' "$RS_TMP/b-end.json")
((drops_a == 0 && drops_b == 0)) ||
	fails+=("the link was dropped (links_dropped + malformed: A $drops_a, B $drops_b): $(grep -hE 'link [0-9]+ .*dropped' "$RS_TMP"/hub-*.err | sed 's/^rshared\[[0-9]*\]: //' | sort | uniq -c | sed 's/^ *//' | paste -sd ';')")
((fb_a == 0 && fb_b == 0)) || fails+=("fallback to kernel TCP: A $fb_a, B $fb_b connections")
((link_total >= opened)) || fails+=("A's link carried $link_total connections; the clients opened $opened")
((link_rx >= bytes)) || fails+=("A's link received $link_rx bytes; the clients verified $bytes")
# An ASan-built hub (the sanitizer pass of tests/run) keeps freed memory in
# its quarantine, so its RSS says nothing about leaks: LeakSanitizer checks
# that hub instead, and the bound is printed but not applied.
rss_note=
if ldd "$RSHARED" 2>/dev/null | grep -q libasan; then
	rss_note=" (ASan-built hub: the bound is not applied)"
else
	for x in a b; do
		w=rss_warm_$x e=rss_end_$x
		((${!e} <= 2 * ${!w} + 8192)) ||
			fails+=("hub ${x^^} RSS grew from ${!w} kB after warm-up to ${!e} kB at the end (bound $((2 * ${!w} + 8192)) kB)")
	done
fi

say "hub RSS: A $rss_warm_a kB after warm-up, $rss_end_a kB at the end, $rss_close_a kB once closed;" \
	"B $rss_warm_b kB, $rss_end_b kB, $rss_close_b kB$rss_note"
say "totals: $bytes bytes verified in $msgs messages; $opened connections ($CONNS concurrent);" \
	"$kills kills; $resets resets seen (the killed workers held $held_by_killed);" \
	"$corrupt corrupt, $lost lost, $errors errors; $((SECONDS - start)) s"
if ((${#fails[@]})); then
	for f in "${fails[@]}"; do
		echo "soak: FAIL: $f" >&2
	done
	exit 1
fi
say "ok"
