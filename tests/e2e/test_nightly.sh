#!/usr/bin/env bash
# The nightly recipe on the CPU backend, and every way issue 22 found to
# fool it:
#  1. run --save-to stores receipts under names that sort by time and never
#     replace one; it makes every missing level of its folder and says why
#     it cannot (a file in the way, a read-only file system, no permission),
#     and its replace hint names no option it refuses;
#  2. an interrupted run is kept, but out of the store (DIR/incomplete/);
#     gate --baseline-dir takes only a complete receipt that has every case
#     of the head (not an interrupted, empty or smaller one, each named),
#     never the head's own run, and says which it took;
#  3. a run is counted once by its run_id (copies, symlinks, a folder and a
#     file in it), the duplicates named;
#  4. history passes over, by name, every file that is no readable receipt;
#     nothing hangs on a FIFO, and /dev/zero behind a symlink is refused
#     unread; history keeps a digest per receipt, not the receipt;
#  5. cpu-backend receipts are compared for correctness and structure only:
#     an A/A of several smoke runs passes every pair, a planted 1.5x
#     slowdown is not judged (and the output says so), a planted wrong
#     answer fails;
#  6. a run timed under a tool injected into it (a sanitizer, a profiler)
#     says so, and no nightly reader takes it.
set -u
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
night="$tmp/nightly"
run() { "$MB" run suites/smoke.toml --backend cpu --rows rope_qk -q --save-to "$night" 2>&1 | sed -n 's/.*receipt written to //p'; }
# edit a receipt with Python: edit IN OUT 'statements over r'
edit() { "$PY" -c "import json,sys; r=json.load(open(sys.argv[1])); exec(sys.argv[3]); json.dump(r, open(sys.argv[2], 'w'))" "$@"; }
jq_py() { "$PY" -c "import json,sys; r=json.load(open(sys.argv[1])); print(($2))" "$1"; }

first=$(run)
second=$(run)
[ -f "$first" ] && [ -f "$second" ] && [ "$first" != "$second" ] && ok || bad "--save-to wrote $first and $second"
# names sort by time: the second run's name sorts after the first's
[ "$(printf '%s\n%s\n' "$second" "$first" | sort | head -1)" = "$first" ] && ok || bad "names do not sort by time"
case "$(basename "$first")" in
[0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9]T[0-9][0-9][0-9][0-9][0-9][0-9].[0-9][0-9][0-9]Z-smoke-*.json) ok ;;
*) bad "--save-to name $(basename "$first")" ;;
esac
"$MB" run suites/smoke.toml --backend cpu --save-to "$night" --force >/dev/null 2>"$tmp/err"
[ $? = 64 ] && grep -q "never replaces" "$tmp/err" && ok || bad "--save-to with --force was not refused"
# every row's status as built is in the receipt
st=$(jq_py "$second" "r['catalog']['rope_qk']['status']")
[ "$st" = experimental ] && ok || bad "catalog.rope_qk.status is '$st'"

# another device kind, newest of all, and a file that is no receipt: passed over
edit "$second" "$night/99999999T000000.000Z-smoke-h200.json" \
	'r["device"]["name"] = "NVIDIA H200"; r["run_id"] = "f" * 32; r["provenance"]["commit_time"] = r["provenance"].get("commit_time", 0) + 86400'
echo '{"kind": "megabench.receipt"}' >"$night/broken.json"
"$MB" gate --baseline-dir "$night" "$second" >/dev/null 2>"$tmp/err"
rc=$?
[ $rc = 0 ] && ok || bad "gate --baseline-dir exit $rc"
grep -q "gate: baseline $first " "$tmp/err" && ok || { bad "gate --baseline-dir did not take $first"; cat "$tmp/err" >&2; }
grep -q "broken.json" "$tmp/err" && ok || bad "the broken file was not named"
# the head alone in its group: nothing to gate against (3)
mkdir "$tmp/alone" && cp "$second" "$tmp/alone/"
"$MB" gate --baseline-dir "$tmp/alone" "$second" >/dev/null 2>"$tmp/err"
rc=$?
[ $rc = 3 ] && grep -q "other than the head's own run" "$tmp/err" && ok || { bad "a lone head: exit $rc"; cat "$tmp/err" >&2; }
"$MB" gate --baseline-dir "$tmp/no-such" "$second" >/dev/null 2>&1
[ $? = 2 ] && ok || bad "a missing --baseline-dir is not exit 2"
"$MB" gate --baseline "$first" --baseline-dir "$night" "$second" >/dev/null 2>&1
[ $? = 64 ] && ok || bad "--baseline with --baseline-dir is not a usage error"

# history over the folder: the broken file is named and passed over
"$MB" history -o "$tmp/hist" "$night" >/dev/null 2>"$tmp/err" && [ -s "$tmp/hist/index.html" ] && [ -s "$tmp/hist/summary.md" ] \
	&& grep -q "NVIDIA H200" "$tmp/hist/summary.md" && grep -q "passed over: $night/broken.json" "$tmp/err" \
	&& ok || { bad "history over the nightly folder"; cat "$tmp/err" >&2; }
rm "$night/broken.json"

# the JSON diff carries each status check
p=tests/golden/promotion/promotion_without_lanes
sup=$("$MB" diff --format json "$p/base.json" "$p/head.json" | "$PY" -c \
	"import json,sys; p=json.load(sys.stdin)['promotions'][0]; print(p['row'], p['head_status'], p['supported'])")
[ "$sup" = "rmsnorm keep False" ] && ok || bad "diff --format json promotions: '$sup'"
"$MB" diff --format json "$p/base.json" "$p/head.json" >"$tmp/promo.json"
"$MB" validate -q "$tmp/promo.json" && ok || bad "the JSON diff breaks schemas/diff.schema.json"
# the history of the nightly folder, as JSON, follows its schema
"$MB" history --format json "$night" >"$tmp/history.json" && "$MB" validate -q "$tmp/history.json" && ok \
	|| bad "history --format json of the nightly folder breaks schemas/history.schema.json"

# ---- --save-to: every level made; failures said as what they are ------------
small() { "$MB" run suites/smoke.toml --backend cpu --rows relu2 --min-time 0 -q "$@"; }
expect 0 "--save-to makes every missing level" -- small --save-to "$tmp/deep/a/b"
ls "$tmp/deep/a/b/"*-smoke-*.json >/dev/null 2>&1 && ok || bad "no receipt under $tmp/deep/a/b"
touch "$tmp/plain"
expect 2 "--save-to under a file" -- small --save-to "$tmp/plain/x"
grep -q "$tmp/plain: is a file, not a directory" "$tmp/err" && ok || bad "a file in the way: $(cat "$tmp/err")"
# a read-only file system, where a user namespace can mount one
mkdir "$tmp/ro"
if unshare -rm true 2>/dev/null; then
	unshare -rm sh -c 'mount -t tmpfs -o ro tmpfs "$1" && shift && exec "$@"' sh "$tmp/ro" \
		"$MB" run suites/smoke.toml --backend cpu --rows relu2 --min-time 0 -q --save-to "$tmp/ro/n" >/dev/null 2>"$tmp/err"
	rc=$?
	[ $rc = 2 ] && grep -q "$tmp/ro/n: cannot create directory: Read-only file system" "$tmp/err" && ok \
		|| bad "a read-only file system: exit $rc: $(cat "$tmp/err")"
else
	echo "note: no user namespaces here: the read-only case is not checked"
fi
# no permission: as an unprivileged user, where root can switch to one
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
	mkdir "$tmp/locked" && chmod 755 "$tmp" "$tmp/locked"
	setpriv --reuid=65534 --regid=65534 --clear-groups "$MB" run suites/smoke.toml --backend cpu --rows relu2 \
		--min-time 0 -q --save-to "$tmp/locked/n" >/dev/null 2>"$tmp/err"
	rc=$?
	[ $rc = 2 ] && grep -q "$tmp/locked/n: cannot create directory: Permission denied" "$tmp/err" && ok \
		|| bad "no permission: exit $rc: $(cat "$tmp/err")"
else
	echo "note: not root: the permission case is not checked"
fi
# a name already taken: every name of the next 30 s, for the process that
# then becomes megabench (its pid); the hint names no option --save-to
# refuses (exit 77 from the helper: the machine was too slow to make the
# names in time, and nothing is checked)
mkdir "$tmp/taken"
"$PY" - "$MB" "$tmp/taken" <<'PY' >/dev/null 2>"$tmp/err"
import os, sys, time
mb, d = sys.argv[1], sys.argv[2]
# every name of the next 30 s: the run stamps its name after its start-up,
# which a loaded CI host can stretch past a second or two
start = int(time.time() * 1000)
for ms in range(start, start + 30000):
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(ms // 1000))
    os.close(os.open("%s/%s.%03dZ-smoke-%d.json" % (d, stamp, ms % 1000, os.getpid()), os.O_CREAT | os.O_WRONLY))
if time.time() * 1000 > start + 20000:
    sys.exit(77)
os.execv(mb, [mb, "run", "suites/smoke.toml", "--backend", "cpu", "--rows", "relu2", "-q", "--save-to", d])
PY
rc=$?
if [ $rc = 77 ]; then
	echo "note: too slow to take the names in time: the replace hint is not checked"
else
	[ $rc = 2 ] && grep -q "save-to never replaces one" "$tmp/err" && ! grep -q -- "--force\|-o" "$tmp/err" && ok \
		|| bad "a taken name: exit $rc: $(cat "$tmp/err")"
fi

# ---- an interrupted run is kept, out of the store --------------------------
store="$tmp/store"
"$MB" run suites/smoke.toml --backend cpu --min-time 0.2 --save-to "$store" >/dev/null 2>"$tmp/int.err" &
pid=$!
for _ in $(seq 1 300); do grep -q '^\[[0-9]*/[0-9]*\] ok ' "$tmp/int.err" && break; sleep 0.1; done
kill -TERM "$pid"
wait "$pid"
rc=$?
kept=$(ls "$store"/incomplete/*.json 2>/dev/null)
[ $rc = 130 ] && [ -n "$kept" ] && ! ls "$store"/*.json >/dev/null 2>&1 && ok \
	|| bad "an interrupted --save-to run: exit $rc, stored $(find "$store" -name '*.json')"
grep -q "not a complete run, so kept out of $store" "$tmp/int.err" && ok || bad "the kept-out receipt is not said: $(tail -2 "$tmp/int.err")"
[ "$(jq_py "$kept" "r['status']")" = interrupted ] && ok || bad "$kept is not marked interrupted"

# ---- the baseline picker ------------------------------------------------------
# a complete run of the full plan (oldest); newer: an interrupted run of
# it (stored there by an older megabench), an empty one (no case, device
# unknown), a complete run of one row only, and a copy of the complete run
pick="$tmp/pick"
mkdir "$pick"
expect 0 "the full smoke run" -- "$MB" run suites/smoke.toml --backend cpu --min-time 0.05 -q -o "$pick/1-full.json"
full="$pick/1-full.json"
n_full=$(jq_py "$full" "len(r['cases'])")
edit "$full" "$pick/2-interrupted.json" '
r["run_id"] = "1" * 32; r["started_at"] = "2099-01-01T00:00:00.000Z"; r["status"] = "interrupted"
r["error"] = "interrupted after 20 of %d cases" % len(r["cases"]); r["cases"] = r["cases"][:20]
s = r["summary"]; s.update(cases=20, ok=20, failed=0, skipped=0, crashed=0, timeout=0, oom=0)
s["converged"] = sum(bool((c.get("timing") or {}).get("converged")) for c in r["cases"])
s["findings"] = sum(len(c["findings"]) for c in r["cases"])'
edit "$pick/2-interrupted.json" "$pick/3-empty.json" '
r["run_id"] = "2" * 32; r["started_at"] = "2099-01-02T00:00:00.000Z"; r["cases"] = []
r["error"] = "interrupted after 0 of %d cases" % r["summary"]["cases"]
r["summary"].update(cases=0, ok=0, converged=0, findings=0)'
"$MB" run suites/smoke.toml --backend cpu --rows relu2 --min-time 0 -q -o "$pick/4-relu2.json" >/dev/null 2>&1
edit "$pick/4-relu2.json" "$pick/4-relu2.json" 'r["started_at"] = "2099-01-03T00:00:00.000Z"'
cp "$full" "$pick/5-copy.json"
expect 0 "every stored receipt is valid" -- "$MB" validate "$pick"/*.json
# the head: the full plan again, with a tolerance loosened on a case the
# interrupted receipt does not have (against it, a "new case" note)
last=$(jq_py "$full" "r['cases'][-1]['id']")
edit "$full" "$tmp/head.json" '
r["run_id"] = "e" * 32; r["started_at"] = "2099-02-01T00:00:00.000Z"
r["cases"][-1]["correctness"]["tolerance"]["rel"] *= 10'
"$MB" gate --baseline-dir "$pick" "$tmp/head.json" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc = 2 ] && grep -q "tolerance_change" "$tmp/out" && ok || bad "gate against the store: exit $rc, expected 2 (tolerance drift on $last)"
grep -q "gate: baseline $full " "$tmp/err" && ok || bad "the complete run was not taken: $(cat "$tmp/err")"
grep -q "passed over: $pick/2-interrupted.json: not a complete run: interrupted after 20 of $n_full cases" "$tmp/err" \
	&& grep -q "passed over: $pick/3-empty.json: not a complete run" "$tmp/err" \
	&& grep -q "passed over: $pick/4-relu2.json: does not cover the head's plan: it lacks" "$tmp/err" \
	&& ok || bad "the receipts passed over are not named with why: $(cat "$tmp/err")"
grep -q "$pick/5-copy.json: the same run as $full" "$tmp/err" && ok || bad "the copy is not named as one run"
# nothing left that can be the baseline: exit 3, each named
mkdir "$tmp/aa" && mv "$full" "$tmp/aa/r1.json" && rm "$pick/5-copy.json"
"$MB" gate --baseline-dir "$pick" "$tmp/head.json" >/dev/null 2>"$tmp/err"
rc=$?
[ $rc = 3 ] && grep -q "none of its 3 receipts .* can be the baseline" "$tmp/err" && [ "$(grep -c "passed over: $pick/" "$tmp/err")" = 3 ] \
	&& ok || bad "no baseline left: exit $rc: $(cat "$tmp/err")"

# ---- one count per run; unreadable files passed over ---------------------------
g=tests/golden/history/one_losing_nightly/receipts
hist="$tmp/hist-in"
mkdir "$hist" && cp "$g/nightly-1.json" "$g/nightly-2.json" "$hist/"
cp "$hist/nightly-2.json" "$hist/nightly-2b.json"
ln -s nightly-2.json "$hist/nightly-2c.json"
expect 0 "history of a folder, a file in it and copies" -- "$MB" history "$hist" "$hist/nightly-2.json"
grep -q "watch: drop in the newest nightly only" "$tmp/out" && ! grep -q "| demote" "$tmp/out" && ok \
	|| bad "one losing nightly counted twice: $(grep rmsnorm "$tmp/out" | tail -1)"
[ "$(grep -c "the same run as $hist/nightly-2.json" "$tmp/err")" = 3 ] && ok || bad "duplicates not named: $(cat "$tmp/err")"
# a truncated receipt, an empty file, a suite's JSON, a dangling link, a FIFO
rm "$hist/nightly-2b.json" "$hist/nightly-2c.json"
head -c 1000 "$g/nightly-2.json" >"$hist/truncated.json"
: >"$hist/empty.json"
echo '{"kind": "megabench.catalog"}' >"$hist/catalog.json"
ln -s no-such.json "$hist/dangling.json"
mkfifo "$hist/fifo.json"
expect 0 "history passes over what it cannot read" -- timeout 20 "$MB" history "$hist"
for f in truncated empty catalog dangling fifo; do
	grep -q "history: passed over: $hist/$f.json" "$tmp/err" && ok || bad "history did not name $f.json: $(cat "$tmp/err")"
done
grep -q "fifo.json: a FIFO, not a regular file: refused unread" "$tmp/err" && ok || bad "the FIFO: $(grep fifo "$tmp/err")"
grep -q "| rmsnorm |" "$tmp/out" && ok || bad "history printed nothing of the good receipts"
mkdir "$tmp/none" && cp "$hist/truncated.json" "$tmp/none/"
expect 3 "history with no receipt left" -- "$MB" history "$tmp/none"
# validate and diff on a FIFO: refused at once, never a wait for a writer
expect 2 "validate a FIFO" -- timeout 20 "$MB" validate "$hist/fifo.json"
grep -q "a FIFO, not a regular file: refused unread" "$tmp/err" && ok || bad "validate on a FIFO: $(cat "$tmp/err")"
expect 2 "diff a FIFO" -- timeout 20 "$MB" diff "$hist/fifo.json" "$g/nightly-1.json"
# The peak memory of a command that reads nothing (the CUDA build's
# libraries alone take about 220 MB on start): the memory checks below
# count what a command takes beyond it.
/usr/bin/time -f "%M" -o "$tmp/rss" "$MB" --help >/dev/null 2>&1
rss0=$(tail -1 "$tmp/rss")
# /dev/zero behind a name: refused unread (not after reading 1 GiB)
ln -s /dev/zero "$tmp/zero.json"
/usr/bin/time -f "%M" -o "$tmp/rss" timeout 20 "$MB" validate "$tmp/zero.json" >/dev/null 2>"$tmp/err"
rc=$?
[ $rc = 2 ] && grep -q "zero.json: a character device, not a regular file: refused unread" "$tmp/err" \
	&& [ "$(($(tail -1 "$tmp/rss") - rss0))" -lt 100000 ] && ok \
	|| bad "/dev/zero: exit $rc, $(tail -1 "$tmp/rss") KiB (start $rss0 KiB): $(cat "$tmp/err")"

# ---- history keeps a digest, not the receipt ---------------------------------
# 60 nightlies of a full smoke run (about 1 MB each): every receipt held
# takes about 500 MB; a digest each stays near one receipt's worth (ASan's
# quarantine of freed memory is kept small so that it measures the same)
many="$tmp/many"
mkdir "$many"
"$PY" - "$pick/2-interrupted.json" "$tmp/head.json" "$many" <<'PY'
import json, sys
r = json.load(open(sys.argv[2]))
r["status"] = "complete"
for k in range(60):
    r["run_id"] = "%032x" % (0x5000 + k)
    r["started_at"] = "2099-03-01T00:%02d:%02d.000Z" % (k // 60, k % 60)
    with open("%s/%03d.json" % (sys.argv[3], k), "w") as f:
        json.dump(r, f)
PY
ASAN_OPTIONS="${ASAN_OPTIONS:-}:quarantine_size_mb=8" /usr/bin/time -f "%M" -o "$tmp/rss" "$MB" history "$many" \
	>/dev/null 2>"$tmp/err"
rc=$?
[ $rc = 0 ] && [ "$(($(tail -1 "$tmp/rss") - rss0))" -lt 120000 ] && ok \
	|| bad "history of 60 receipts: exit $rc, peak $(tail -1 "$tmp/rss") KiB (start $rss0 KiB)"

# ---- cpu timings are not judged: an A/A of smoke runs, and plants -------------
# (the full run above is r1)
aa="$tmp/aa"
for k in 2 3 4; do
	"$MB" run suites/smoke.toml --backend cpu --min-time 0.05 -q -o "$aa/r$k.json" >/dev/null 2>&1 || bad "A/A run $k failed"
done
alarms=0
for a in "$aa"/r*.json; do
	for b in "$aa"/r*.json; do
		[ "$a" = "$b" ] && continue
		"$MB" gate --baseline "$a" "$b" >"$tmp/out" 2>&1 || { alarms=$((alarms + 1)); echo "A/A alarm: $(grep 'gate:' "$tmp/out")" >&2; }
	done
done
[ $alarms = 0 ] && ok || bad "A/A of 4 cpu smoke runs: $alarms of 12 pairs failed the gate"
expect 0 "a receipt against itself" -- "$MB" gate --baseline "$aa/r1.json" "$aa/r1.json"
# relu2 made 1.5x slower: not judged, and the output says why
edit "$aa/r2.json" "$tmp/slow.json" '
r["run_id"] = "5" * 32
for c in r["cases"]:
    t = c.get("timing")
    if c["row"] == "relu2" and t:
        t["samples_ns"] = [1.5 * x for x in t["samples_ns"]]
        for k in ("median_ns", "mean_ns", "stddev_ns", "min_ns", "max_ns", "p10_ns", "p90_ns"):
            t[k] = 1.5 * t[k]'
expect 0 "a planted 1.5x slowdown on the cpu backend" -- "$MB" gate --baseline "$aa/r1.json" "$tmp/slow.json"
grep -q "timings not judged (cpu backend" "$tmp/out" && grep -q "gate: exit 0, pass (correctness and structure only" "$tmp/out" \
	&& ok || bad "the gate does not say cpu timings are not judged: $(head -3 "$tmp/out")"
[ "$(grep -c '^relu2/reference/.*NOT JUDGED$' "$tmp/out")" = "$(jq_py "$tmp/slow.json" "sum(c['row'] == 'relu2' for c in r['cases'])")" ] \
	&& ok || bad "relu2's cases are not shown as NOT JUDGED: $(grep '^relu2' "$tmp/out" | head -2)"
expect 0 "diff --format json of the plant" -- "$MB" diff --format json "$aa/r1.json" "$tmp/slow.json"
[ "$("$PY" -c "import json,sys; d=json.load(sys.stdin); print({c['comparison']['why'] for c in d['cases']})" <"$tmp/out")" \
	= "{'timing not judged (cpu backend)'}" ] && ok || bad "the JSON diff's cases: $(head -c 300 "$tmp/out")"
# relu2 wrong: correctness is still compared
edit "$tmp/slow.json" "$tmp/wrong.json" '
c = [c for c in r["cases"] if c["row"] == "relu2"][0]
c["status"] = "failed"; c["correctness"].update(passed=False, over_tolerance=7, max_abs=0.5)
r["summary"]["ok"] -= 1; r["summary"]["failed"] += 1'
expect 2 "a planted wrong answer on the cpu backend" -- "$MB" gate --baseline "$aa/r1.json" "$tmp/wrong.json"

# ---- a run timed under a tool injected into it is no nightly ------------------
# (compute-sanitizer and ncu inject through CUDA_INJECTION64_PATH; LD_PRELOAD
# stands in for them here; an AddressSanitizer build refuses a preload
# ahead of its runtime unless told not to check the order)
inst="$tmp/instrumented"
mkdir -p "$inst"
plain=$("$MB" run suites/smoke.toml --backend cpu --rows rope_qk -q --save-to "$inst" 2>&1 | sed -n 's/.*receipt written to //p')
ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0" LD_PRELOAD=/lib/x86_64-linux-gnu/libm.so.6 "$MB" run suites/smoke.toml --backend cpu --rows rope_qk -q \
	--save-to "$inst" >"$tmp/inst.out" 2>&1
under=$(sed -n 's/.*receipt written to //p' "$tmp/inst.out")
grep -q "timed under unknown (LD_PRELOAD=" "$tmp/inst.out" && ok || bad "no notice of the injected library: $(head -3 "$tmp/inst.out")"
[ "$(jq_py "$under" "r['instrumented']['variable']")" = LD_PRELOAD ] && ok || bad "the receipt does not say it was instrumented"
[ "$(jq_py "$plain" "'instrumented' in r")" = False ] && ok || bad "a plain run says it was instrumented"
"$MB" gate --baseline-dir "$inst" "$plain" >/dev/null 2>"$tmp/err"
rc=$?
[ $rc = 3 ] && grep -q "$(basename "$under").*timed under unknown" "$tmp/err" && ok \
	|| { bad "gate --baseline-dir took the instrumented run: exit $rc"; cat "$tmp/err" >&2; }
"$MB" history "$inst" >"$tmp/out" 2>"$tmp/err"
grep -q "timed under" "$tmp/err" "$tmp/out" && ok || bad "history does not pass over the instrumented run: $(cat "$tmp/err")"

finish nightly
