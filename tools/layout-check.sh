#!/usr/bin/env bash
# layout-check.sh - hold the tree to its layout (README.md, "Layout"):
#   includes   every #include "x.h" under core/, preload/ and tools/ names a
#              header by plain name, found in a folder its side may see;
#   sizes      no .c file there over 600 lines, no function over 80; the
#              same for the test programs (tests/, tests/fuzz/ and their
#              subfolders named below), whose includes are free.
# Prints one line per breach and exits 1 when there is any; `make test`
# runs it (tests/layout-keeps-sides-and-sizes.bats).
set -u
cd "$(dirname "$0")/.."

# the folders each place may include from
declare -A SEES=(
	[core/shared]="core/shared"
	[core/proc]="core/shared core/proc"
	[core/xport]="core/shared core/xport"
	[core/hub]="core/shared core/xport core/hub"
	[preload]="preload core/shared core/proc"
	[tools]="tools core/shared core/proc"          # the rshare command
	[tools/rshared.c]="tools core/shared core/xport core/hub" # the hub's main
)
bad=0
breach() {
	echo "$*"
	bad=1
}

check_includes() {
	local f=$1 dirs=$2 h d found
	while IFS= read -r h; do
		if [[ $h == */* ]]; then
			breach "$f: #include \"$h\": a header is named by its plain name"
			continue
		fi
		found=
		for d in $dirs; do
			[[ -e $d/$h ]] && found=$d
		done
		if [[ -z $found ]]; then
			local where
			where=$(cd core 2>/dev/null && ls -d */"$h" 2>/dev/null | head -n1)
			breach "$f: #include \"$h\"${where:+ (core/$where)}: not on this side (it sees: $dirs)"
		fi
	done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
}

for place in core/shared core/proc core/xport core/hub preload tools; do
	for f in "$place"/*.[ch]; do
		[[ -e $f ]] || continue
		check_includes "$f" "${SEES[$f]:-${SEES[$place]}}"
	done
done

# sizes: functions are K&R style, their body's braces in column 0
for f in core/*/*.c preload/*.c tools/*.c tests/*.c tests/fuzz/*.c tests/readiness/*.c tests/bench/*.c; do
	[[ -e $f ]] || continue
	n=$(wc -l <"$f")
	((n <= 600)) || breach "$f: $n lines (at most 600)"
	awk -v f="$f" '
		/^[[:space:]]*$/ || /^}/ || /^#/ || /;[[:space:]]*$/ || /\*\/[[:space:]]*$/ { sig = NR + 1 }
		/^\{/ { start = sig; inside = 1; next }
		/^}/ && inside { len = NR - start + 1; inside = 0
			if (len > 80) printf "%s:%d: function of %d lines (at most 80)\n", f, start, len; sig = NR + 1 }
	' "$f" | while IFS= read -r l; do echo "$l"; done
done | { out=$(cat); [[ -z $out ]] || { echo "$out"; exit 1; }; } || bad=1
exit $bad
