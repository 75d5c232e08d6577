# Sourced by the end-to-end scripts: a scratch folder removed on exit, and
# the check counters. `ok` and `bad WHY` count a check; `expect CODE WHAT --
# command...` runs a command into $tmp/out and $tmp/err and checks its exit
# code; `finish NAME` prints "NAME: N passed, N failed" and sets the exit.
MB=${MEGABENCH:?}
SRC=${MB_SOURCE_ROOT:?}
PY=/usr/bin/python3
cd "$SRC" || exit 1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
checks=0
ok() { checks=$((checks + 1)); }
bad() { checks=$((checks + 1)); fails=$((fails + 1)); echo "FAIL: $*" >&2; }
expect() { # expect CODE DESCRIPTION -- command...
	local want=$1 what=$2; shift 3
	"$@" >"$tmp/out" 2>"$tmp/err"; local got=$?
	if [ "$got" = "$want" ]; then ok; else bad "$what: exit $got, expected $want"; cat "$tmp/err" >&2; fi
}
finish() {
	echo "$1: $((checks - fails)) passed, $fails failed"
	[ "$fails" = 0 ]
}
