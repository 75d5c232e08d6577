#!/bin/sh
# tests/gpu/sass_profile.py on a small source page written here (the
# columns ncu 2025 writes, in its order, a subset of them): the totals, the
# per-unit column, the opcode table with predicated instructions counted
# under their opcode, the stall site with its reasons and the executed
# instructions before it; then a file that is not a source page, a
# missing file, a count that is not a number and a --per that is not
# positive, each refused with the file, the value or the option named.
set -u
src="${MB_SOURCE_ROOT:?}"
PY=${PYTHON:-python3}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

cat >"$tmp/page.csv" <<'CSV'
"Kernel Name","void k(float *)",
"Address","Source","Warp Stall Sampling (All Samples)","Warp Stall Sampling (Not-issued Samples)","Instructions Executed","stall_barrier","stall_long_sb","stall_long_sb (Not Issued)"
"0x7f0000000100","LDG.E.128 R4, desc[UR4][R2.64]","2","0","1,000","0","2","0"
"0x7f0000000110","BRA 0x7f0000000200","0","0","0","0","0","0"
"0x7f0000000120","FFMA R6, R4, R5, R6","60","40","2,000","0","60","40"
"0x7f0000000130","@P0   FFMA R7, R4, R5, R7","8","1","1,000","0","8","1"
"0x7f0000000140","BAR.SYNC.DEFER_BLOCKING 0x0","30","20","1,000","30","0","0"
CSV
out=$("$PY" "$src/tests/gpu/sass_profile.py" "$tmp/page.csv" --per 500 --unit element --top 1 --context 2) ||
	fail "sass_profile.py exited $?"
echo "$out"
echo "$out" | grep -q "^kernel: void k(float \*)$" || fail "kernel name"
echo "$out" | grep -q "warp instructions executed: 5,000, 10.00 per element" || fail "totals"
echo "$out" | grep -q "warp-stall samples: 100; 61 (61%) while the scheduler issued nothing" || fail "samples"
echo "$out" | grep -q "^by reason: long_sb 70%, barrier 30%$" || fail "reasons overall"
echo "$out" | grep -Eq "^FFMA +3,000 +60.0% +6.00 +68 +68.0%$" || fail "FFMA row (the predicated one counted)"
echo "$out" | grep -Eq "^LDG +1,000 +20.0% +2.00 +2 +2.0%$" || fail "LDG row"
echo "$out" | grep -q "^BRA" && fail "an opcode never executed is listed"
# the site: FFMA R6 (60 samples), after LDG (the unexecuted BRA skipped)
site=$(echo "$out" | sed -n '/where warps wait/,$p')
echo "$site" | grep -q "^  000100 .*LDG.E.128" || fail "the load before the site"
echo "$site" | grep -q "BRA" && fail "an unexecuted instruction shown before the site"
echo "$site" | grep -q "^> 000120 .*60.0%  FFMA R6" || fail "the site"
echo "$site" | grep -q "^         long_sb 100%$" || fail "the site's reasons"

printf 'a,b\n1,2\n' >"$tmp/not.csv"
err=$("$PY" "$src/tests/gpu/sass_profile.py" "$tmp/not.csv" 2>&1) && fail "a file that is not a source page accepted"
echo "$err" | grep -q "not.csv: not an ncu source page" || fail "refusal does not name the file: $err"
err=$("$PY" "$src/tests/gpu/sass_profile.py" "$tmp/missing.csv" 2>&1) && fail "a missing file accepted"
echo "$err" | grep -q "missing.csv: .*No such file" || fail "refusal does not name the missing file: $err"
sed 's/"1,000"/"many"/' "$tmp/page.csv" >"$tmp/bad.csv"
err=$("$PY" "$src/tests/gpu/sass_profile.py" "$tmp/bad.csv" 2>&1) && fail "a count that is not a number accepted"
echo "$err" | grep -q "bad.csv: .*many" || fail "refusal does not name the file and the value: $err"
err=$("$PY" "$src/tests/gpu/sass_profile.py" "$tmp/page.csv" --per 0 2>&1) && fail "--per 0 accepted"
echo "$err" | grep -q -- "--per must be positive" || fail "refusal does not name --per: $err"
echo "sass_profile: ok"
