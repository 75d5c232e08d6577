#!/usr/bin/env bash
# The nightly recipe on the CPU backend: run --save-to stores receipts
# under names that sort by time and never replace one; gate --baseline-dir
# takes the newest comparable receipt other than the head's own run (not
# one of another device kind, not a file that is no receipt) and says which;
# history reads the folder; and the receipt records each row's status.
set -u
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
night="$tmp/nightly"
run() { "$MB" run suites/smoke.toml --backend cpu --rows rope_qk -q --save-to "$night" 2>&1 | sed -n 's/.*receipt written to //p'; }

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
st=$("$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))['catalog']['rope_qk']['status'])" "$second")
[ "$st" = experimental ] && ok || bad "catalog.rope_qk.status is '$st'"

# another device kind, newest of all, and a file that is no receipt: passed over
"$PY" - "$second" "$night/99999999T000000.000Z-smoke-h200.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
r["device"]["name"] = "NVIDIA H200"
r["run_id"] = "f" * 32
r["provenance"]["commit_time"] = r["provenance"].get("commit_time", 0) + 86400
json.dump(r, open(sys.argv[2], "w"))
PY
echo '{"kind": "megabench.receipt"}' >"$night/broken.json"
"$MB" gate --baseline-dir "$night" "$second" >/dev/null 2>"$tmp/err"
rc=$?
{ [ $rc = 0 ] || [ $rc = 3 ]; } && ok || bad "gate --baseline-dir exit $rc"
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

# history over the folder (the broken file is refused by name: exit 3)
rm "$night/broken.json"
"$MB" history -o "$tmp/hist" "$night" >/dev/null 2>"$tmp/err" && [ -s "$tmp/hist/index.html" ] && [ -s "$tmp/hist/summary.md" ] \
	&& grep -q "NVIDIA H200" "$tmp/hist/summary.md" && ok || { bad "history over the nightly folder"; cat "$tmp/err" >&2; }

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

finish nightly
