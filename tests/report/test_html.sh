#!/bin/sh
# megabench report, opened in headless Chromium.
#
#  1. golden receipts of two revisions: the page renders at 1400 and 800 px
#     (a non-trivial screenshot, no console errors), its DOM holds the
#     verdict and history tables, a time chart and box plots per row and the
#     marked regression; measured in the browser: the page uses the whole
#     width at 1400 px, nothing but the scrolling tables is wider than the
#     window at 800 px, no chart text leaves its chart, and axis ticks are
#     round numbers.
#  2. two receipts of one commit: the history tells them apart by run time
#     and shows the commit date.
#  3. a CPU receipt with a GPU one: two sections, neither dropped.
#  4. a receipt whose every string field holds markup: escaped, never run.
#  5. committed H200 receipts: lanes of every receipt, ceilings named,
#     "model" explained; with every fold open, nothing clipped (no table
#     scrolls in its box) and every mark of a time chart between two ticks.
#  6. the history page: the same measures.
# Skips (77) without /usr/bin/chromium.
set -u
src="${MB_SOURCE_ROOT:?}"
mb="${MEGABENCH:?}"
chromium=/usr/bin/chromium
PY=/usr/bin/python3
MIN_SCREENSHOT_BYTES=20000
[ -x "$chromium" ] || { echo "skip: $chromium not found"; exit 77; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
gate="$src/tests/golden/gate"
opts="--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
--disable-component-update --disable-sync --disable-dev-shm-usage --hide-scrollbars"
profile=0
chrome() { # chrome ARGS... (a fresh profile each time)
	profile=$((profile + 1))
	# shellcheck disable=SC2086
	timeout 120 "$chromium" $opts --user-data-dir="$tmp/profile$profile" "$@"
}

# Measure a page in the browser: a wrapper frames it at WIDTH px and writes
# what it found into its own title, which --dump-dom shows. Prints the title.
measure() { # measure HTML WIDTH
	cat >"$tmp/measure.html" <<HTML
<!DOCTYPE html><html><head><title>pending</title></head><body style="margin:0">
<iframe id="f" src="file://$1" style="border:0;width:$2px;height:900px"></iframe>
<script>
document.getElementById('f').addEventListener('load', function () {
  var d = this.contentDocument, w = this.contentWindow, bad = [];
  // everything folded is opened: a table under a <details> must fit too
  d.querySelectorAll('details').forEach(function (e) { e.open = true; });
  var width = d.documentElement.scrollWidth;
  if (width > $2) bad.push('page is ' + width + ' px wide');
  var used = 0;
  d.querySelectorAll('table, .card').forEach(function (e) {
    used = Math.max(used, e.getBoundingClientRect().right);
  });
  if ($2 >= 1400 && used < 0.85 * $2) bad.push('content uses only ' + Math.round(used) + ' px');
  // nothing clipped: no table scrolls inside its box, no card is wider than itself
  d.querySelectorAll('.wrap, .card, td, th').forEach(function (e) {
    if (e.scrollWidth > e.clientWidth + 1)
      bad.push((e.className || e.tagName) + ' clipped: ' + e.scrollWidth + ' px in ' + e.clientWidth + ' ("'
        + e.textContent.slice(0, 30) + '")');
  });
  // every mark of a time chart lies between two ticks of its axis
  d.querySelectorAll('svg.chart').forEach(function (svg) {
    if (!/by shape$/.test(svg.getAttribute('aria-label') || '')) return;
    var xs = [].filter.call(svg.querySelectorAll('line.grid, line.zero'), function (l) {
      return l.x1.baseVal.value === l.x2.baseVal.value;
    }).map(function (l) { return l.x1.baseVal.value; });
    if (!xs.length) { bad.push('a time chart without ticks'); return; }
    var lo = Math.min.apply(null, xs) - 5, hi = Math.max.apply(null, xs) + 5;
    svg.querySelectorAll('g').forEach(function (g) {
      var b = g.getBBox();
      if (b.width && (b.x < lo || b.x + b.width > hi))
        bad.push('a mark at ' + Math.round(b.x) + '-' + Math.round(b.x + b.width) + ' lies beyond the ticks '
          + Math.round(lo + 5) + '-' + Math.round(hi - 5));
    });
  });
  d.querySelectorAll('svg.chart').forEach(function (svg) {
    var vb = svg.viewBox.baseVal;
    svg.querySelectorAll('text').forEach(function (t) {
      var b = t.getBBox();
      if (b.x < -0.5 || b.x + b.width > vb.width + 0.5 || b.y < -0.5 || b.y + b.height > vb.height + 0.5)
        bad.push('text "' + t.textContent.slice(0, 30) + '" leaves its chart');
    });
    var ticks = [].map.call(svg.querySelectorAll('text.tick'), function (t) { return t.textContent; });
    ticks.forEach(function (s) {
      var m = /^([+-]?[0-9.]+)(%| ns| us| ms| s)$/.exec(s);
      if (!m) return;
      var v = Math.abs(parseFloat(m[1]));
      if (v === 0) return;
      var mant = v / Math.pow(10, Math.floor(Math.log10(v)));
      if (Math.abs(mant - Math.round(mant * 2) / 2) > 1e-6) bad.push('tick ' + s + ' is not round');
    });
  });
  d.title = bad.length ? 'BAD: ' + bad.slice(0, 5).join('; ') : 'OK';
  document.title = d.title;
});
</script></body></html>
HTML
	chrome --allow-file-access-from-files --dump-dom "file://$tmp/measure.html" 2>/dev/null \
		| sed -n 's:.*<title>\(.*\)</title>.*:\1:p' | head -n 1
}

# ---- 1. two revisions of the golden suite --------------------------------
"$mb" report -o "$tmp/out" "$gate/regression/head.json" "$gate/regression/base.json" \
	|| fail "megabench report exited $?"
html="$tmp/out/index.html"
[ -s "$html" ] || fail "no index.html"
[ -s "$tmp/out/summary.md" ] || fail "no summary.md"
grep -q '<script' "$html" && fail "index.html has a script"
grep -Eq '(src|href)="https?:' "$html" && fail "index.html loads something from the network"
grep -q 'max-width:1200px' "$html" && fail "the page is still held to 1200 px"
grep -q 'rmsnorm' "$tmp/out/summary.md" || fail "summary.md lacks the rmsnorm row"
grep -q '| rmsnorm | v0.1-2' "$tmp/out/summary.md" || fail "summary.md does not name the regressing revision"

for width in 1400 800; do
	chrome --enable-logging=stderr --v=0 --screenshot="$tmp/shot$width.png" --window-size=$width,2000 \
		"file://$html" >"$tmp/shot$width.log" 2>&1
	[ -s "$tmp/shot$width.png" ] || { cat "$tmp/shot$width.log"; fail "no screenshot at $width px"; }
	size=$(wc -c <"$tmp/shot$width.png")
	[ "$size" -ge "$MIN_SCREENSHOT_BYTES" ] || fail "screenshot at $width px is only $size bytes"
	if grep -E 'Uncaught|ERROR:CONSOLE|CONSOLE\(' "$tmp/shot$width.log"; then
		fail "console errors at $width px"
	fi
	got=$(measure "$html" $width)
	[ "$got" = OK ] || fail "measured at $width px: $got"
done
chrome --dump-dom "file://$html" >"$tmp/dom.html" 2>/dev/null
grep -q '<table class="verdicts" id="verdicts">' "$tmp/dom.html" || fail "verdict table missing from the DOM"
grep -q '<table class="history" id="history">' "$tmp/dom.html" || fail "history table missing from the DOM"
grep -q 'median time per call by shape' "$tmp/dom.html" || fail "no chart of the time per call"
grep -Eq '<title>fused bf16 hot [a-z0-9]+: median [0-9.]+ us, p10 [0-9.]+ us, p90 [0-9.]+ us' "$tmp/dom.html" \
	|| fail "a mark does not give its median and p10-p90"
grep -q 'distribution of the raw samples' "$tmp/dom.html" || fail "no box plots"
grep -q 'samples (0 excluded), median' "$tmp/dom.html" || fail "a box plot does not describe its samples"
grep -q 'first regression' "$tmp/dom.html" || fail "the first regression is not marked"
grep -q 'class="reg"' "$tmp/dom.html" || fail "the regression line is not drawn"
grep -Eq '<tspan[^>]*>2025-01-01</tspan>' "$tmp/dom.html" && grep -Eq '<tspan[^>]*>2025-01-02</tspan>' "$tmp/dom.html" \
	|| fail "the history gives no commit dates"
svgs=$(grep -o '<svg class="chart"' "$tmp/dom.html" | wc -l)
[ "$svgs" -ge 6 ] || fail "expected at least 6 charts (time, box plot, history per row), found $svgs"
# fused and fallback are distinct, labelled series: a circle and a square
grep -q '<circle cx=' "$tmp/dom.html" && grep -q 'fill="#d9822b"' "$tmp/dom.html" \
	|| fail "fused and fallback are not drawn as distinct series"

# ---- 2. two receipts of one commit ------------------------------------------
"$PY" - "$gate/regression/head.json" "$tmp/rerun.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
r["started_at"] = "2025-01-04T12:34:56Z"
r["run_id"] = "f" * 32
json.dump(r, open(sys.argv[2], "w"))
PY
"$mb" report -o "$tmp/same" "$gate/regression/base.json" "$gate/regression/head.json" "$tmp/rerun.json" \
	>/dev/null || fail "report of a rerun exited $?"
grep -q 'run 10:00:00' "$tmp/same/index.html" && grep -q 'run 12:34:56' "$tmp/same/index.html" \
	|| fail "two runs of one commit are not told apart"

# ---- 3. a CPU receipt with a GPU one ------------------------------------------
"$mb" run "$src/suites/smoke.toml" --backend cpu --rows relu2 --dtypes fp32 --min-time 0 -q -o "$tmp/cpu.json" \
	>/dev/null 2>&1 || fail "CPU run failed"
"$mb" report -o "$tmp/mixed" "$tmp/cpu.json" "$gate/regression/head.json" >/dev/null || fail "mixed report exited $?"
grep -q '2 receipts in 2 groups' "$tmp/mixed/index.html" || fail "the mixed report does not say it has 2 groups"
grep -q 'NVIDIA H100 80GB HBM3 · cuda backend' "$tmp/mixed/index.html" || fail "the GPU receipt was dropped"
grep -q '· cpu backend · suite smoke' "$tmp/mixed/index.html" || fail "the CPU receipt was dropped"
grep -q '2 receipts in 2 groups' "$tmp/mixed/summary.md" || fail "summary.md does not say it has 2 groups"

# ---- 4. markup in every string field ------------------------------------------
"$PY" - "$src/schemas/receipt.schema.json" "$gate/regression/head.json" "$tmp/markup.json" <<'PY'
import json, sys, jsonschema
MARK = '"\'><script>document.title="X"</script><b>'
schema = json.load(open(sys.argv[1]))
r = json.load(open(sys.argv[2]))
def mark(v):
    if isinstance(v, dict):
        return {k: mark(x) for k, x in v.items()}
    if isinstance(v, list):
        return [mark(x) for x in v]
    return MARK if isinstance(v, str) else v
m = mark(r)
for c in m["cases"]:  # keys of the shape too, each made unique
    c["shape"] = {MARK + str(i): v for i, (k, v) in enumerate(c["shape"].items())}
# put back every string the schema refuses (enums, patterns), until valid
validator = jsonschema.Draft7Validator(schema)
for _ in range(20):
    errors = list(validator.iter_errors(m))
    if not errors:
        break
    for e in errors:
        path = list(e.absolute_path)
        if not path:
            continue
        src, dst = r, m
        for p in path[:-1]:
            src = src[p] if not (isinstance(src, dict) and p not in src) else None
            dst = dst[p]
            if src is None:
                break
        if src is not None and isinstance(dst, (dict, list)):
            try:
                dst[path[-1]] = src[path[-1]]
            except (KeyError, IndexError, TypeError):
                pass
errors = list(validator.iter_errors(m))
if errors:
    sys.exit("still invalid: " + errors[0].message)
for c in m["cases"]:
    assert c["variant"] == MARK and c["family"] == MARK, "variant and family must carry the markup"
assert m["provenance"]["describe"] == MARK
json.dump(m, open(sys.argv[3], "w"))
PY
[ $? = 0 ] || fail "could not make the receipt with markup"
"$mb" report -o "$tmp/markup" "$tmp/markup.json" >/dev/null 2>"$tmp/markup.err" || { cat "$tmp/markup.err"; fail "report of the markup receipt exited $?"; }
grep -q '<script' "$tmp/markup/index.html" && fail "markup from the receipt reached the page unescaped"
chrome --dump-dom "file://$tmp/markup/index.html" >"$tmp/markup.dom" 2>/dev/null
grep -q '<title>megabench report</title>' "$tmp/markup.dom" || fail "markup from a receipt ran: $(grep -o '<title>[^<]*' "$tmp/markup.dom")"
grep -q '&lt;script&gt;document.title' "$tmp/markup.dom" || fail "the markup is not shown as text"

# ---- 5. committed H200 receipts: the older receipt's lanes are shown under
# the newest (which has none), each ratio names its ceiling, "model" is
# explained, and nothing is clipped or beyond the ticks at 1400 and 800 px
"$mb" report -o "$tmp/h200" "$src/reports/h200/lanes-a.json.gz" "$src/reports/h200/heavy-d.json.gz" >/dev/null \
	|| fail "report of the H200 receipts exited $?"
grep -q '<h4 class="lanes">Lanes of a8fe8d0' "$tmp/h200/index.html" || fail "lanes-a's lanes are not shown under heavy-d"
grep -q '### Lanes of a8fe8d0' "$tmp/h200/summary.md" || fail "summary.md drops lanes-a's lanes"
grep -Eq '<td>0\.[0-9]{3} of (copy|read\+write|GEMM)</td>' "$tmp/h200/index.html" || fail "a ratio does not name its ceiling"
grep -q 'model: the speedup the row' "$tmp/h200/index.html" && grep -q 'model: the speedup the row' "$tmp/h200/summary.md" \
	|| fail "model is not explained"
for width in 1400 800; do
	got=$(measure "$tmp/h200/index.html" $width)
	[ "$got" = OK ] || fail "the H200 report measured at $width px: $got"
done

# ---- 6. the history page: nothing clipped at 1400 and 800 px
"$mb" history -o "$tmp/hist" "$src/tests/golden/history/two_losing_nightlies/receipts" "$src/reports/h200/heavy-d.json.gz" \
	>/dev/null || fail "history exited $?"
for width in 1400 800; do
	got=$(measure "$tmp/hist/index.html" $width)
	[ "$got" = OK ] || fail "the history page measured at $width px: $got"
done

if [ -n "${MB_REPORT_KEEP:-}" ]; then
	cp "$tmp/shot1400.png" "$MB_REPORT_KEEP/shot.png"
	cp "$html" "$MB_REPORT_KEEP/index.html"
fi
echo "ok: $svgs charts; widths, ticks, history, groups and escaping checked"
