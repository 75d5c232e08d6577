#!/bin/sh
# megabench report on golden receipts, then the page opened in headless
# Chromium: it must render (a non-trivial screenshot), log no console errors,
# and its DOM must hold the verdict table, the history table and SVG plots.
# Skips (77) without /usr/bin/chromium.
set -u
src="${MB_SOURCE_ROOT:?}"
mb="${MEGABENCH:?}"
chromium=/usr/bin/chromium
MIN_SCREENSHOT_BYTES=20000
[ -x "$chromium" ] || { echo "skip: $chromium not found"; exit 77; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
gate="$src/tests/golden/gate"

"$mb" report -o "$tmp/out" "$gate/regression/head.json" "$gate/regression/base.json" \
	|| fail "megabench report exited $?"
html="$tmp/out/index.html"
[ -s "$html" ] || fail "no index.html"
[ -s "$tmp/out/summary.md" ] || fail "no summary.md"
grep -q '<script' "$html" && fail "index.html has a script"
grep -Eq '(src|href)="https?:' "$html" && fail "index.html loads something from the network"
grep -q 'rmsnorm' "$tmp/out/summary.md" || fail "summary.md lacks the rmsnorm row"
grep -q '| rmsnorm | v0.1-2' "$tmp/out/summary.md" || fail "summary.md does not name the regressing revision"

opts="--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
--disable-component-update --disable-sync --disable-dev-shm-usage"
# shellcheck disable=SC2086
timeout 120 "$chromium" $opts --user-data-dir="$tmp/profile1" --enable-logging=stderr --v=0 \
	--screenshot="$tmp/shot.png" --window-size=1280,2000 "file://$html" >"$tmp/shot.log" 2>&1
[ -s "$tmp/shot.png" ] || { cat "$tmp/shot.log"; fail "no screenshot"; }
size=$(wc -c <"$tmp/shot.png")
[ "$size" -ge "$MIN_SCREENSHOT_BYTES" ] || fail "screenshot is only $size bytes"
if grep -E 'Uncaught|ERROR:CONSOLE|CONSOLE\(' "$tmp/shot.log"; then
	fail "console errors"
fi
# shellcheck disable=SC2086
timeout 120 "$chromium" $opts --user-data-dir="$tmp/profile2" --dump-dom "file://$html" \
	>"$tmp/dom.html" 2>/dev/null
grep -q '<table id="verdicts">' "$tmp/dom.html" || fail "verdict table missing from the DOM"
grep -q '<table id="history">' "$tmp/dom.html" || fail "history table missing from the DOM"
svgs=$(grep -o '<svg' "$tmp/dom.html" | wc -l)
[ "$svgs" -ge 4 ] || fail "expected at least 4 SVG plots in the DOM, found $svgs"
grep -q 'first regression' "$tmp/dom.html" || fail "the first regression is not marked"
if [ -n "${MB_REPORT_KEEP:-}" ]; then
	cp "$tmp/shot.png" "$MB_REPORT_KEEP/shot.png"
	cp "$html" "$MB_REPORT_KEEP/index.html"
fi
echo "ok: screenshot $size bytes, $svgs SVG plots"
