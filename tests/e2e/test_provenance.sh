#!/usr/bin/env bash
# Provenance is the binary's: `megabench run` from the checkout it was
# built from, from inside another git repository and from a copy of the
# checkout with files edited (a notice naming them, the receipt recording
# them, the commit still the binary's); the build's generator without git
# and with a dirty tree; and the gate of the committed planted-relu2
# receipts, which have no binary provenance and so get statistics.
set -u
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
jq_py() { "$PY" -c "import json,sys; r=json.load(open(sys.argv[1])); print($2)" "$1"; }
blob_id() { "$PY" -c "import hashlib,sys; d=open(sys.argv[1],'rb').read(); print(hashlib.sha1(b'blob %d\0' % len(d) + d).hexdigest())" "$1"; }
schema_check() { # independent validator: python3-jsonschema, draft 7
	"$PY" - "$SRC/schemas/receipt.schema.json" "$1" <<'PY'
import json, sys, jsonschema
errors = list(jsonschema.Draft7Validator(json.load(open(sys.argv[1]))).iter_errors(json.load(open(sys.argv[2]))))
for e in errors[:5]:
    print("/" + "/".join(map(str, e.absolute_path)), e.message, file=sys.stderr)
sys.exit(1 if errors else 0)
PY
}
run_in() { # run_in DIR OUT.json: relu2 on the cpu backend, started in DIR
	local dir=$1 out=$2
	(cd "$dir" && "$MB" run "$SRC/suites/smoke.toml" --backend cpu --rows relu2 --dtypes fp32 -o "$out") \
		>"$tmp/out" 2>"$tmp/err"
}
have_git=0
command -v git >/dev/null 2>&1 && have_git=1
g() { git -c user.name=megabench -c user.email=test@megabench.invalid -c init.defaultBranch=main "$@"; }
src_real=$(cd "$SRC" && pwd -P)

# 1. from the checkout the binary was built from: the binary's provenance,
# the executable's blob id, and a checkout that matches
run_in "$SRC" "$tmp/home.json" && ok || { bad "run in the source tree: exit $?"; cat "$tmp/err" >&2; }
[ "$(jq_py "$tmp/home.json" "(r['schema_version'], r['provenance']['origin'])")" = "(2, 'binary')" ] && ok \
	|| bad "not a version 2 receipt with binary provenance"
binary_commit=$(jq_py "$tmp/home.json" "r['provenance'].get('commit')")
if [ "$have_git" = 1 ] && head=$(git -C "$SRC" rev-parse HEAD 2>/dev/null); then
	[ "$binary_commit" = "$head" ] && ok || bad "binary's commit $binary_commit is not the tree's HEAD $head"
fi
[ "$(jq_py "$tmp/home.json" "r['provenance']['executable']['blob_id']")" = "$(blob_id "$MB")" ] && ok \
	|| bad "executable.blob_id is not the blob id of $MB"
[ "$(jq_py "$tmp/home.json" "[s['blob_id'] for s in r['provenance']['sources'] if s['path'] == 'src/kernels/relu2.cu']")" \
	= "['$(blob_id "$SRC/src/kernels/relu2.cu")']" ] && ok || bad "relu2.cu's embedded blob id is not its bytes'"
[ "$(jq_py "$tmp/home.json" "(r['provenance']['checkout']['workdir'], r['provenance']['checkout']['matches'])")" \
	= "('$src_real', True)" ] && ok || bad "the source tree is not recorded as a matching checkout"
grep -q "differs from the sources" "$tmp/err" && bad "a notice about the unchanged source tree" || ok
expect 0 "megabench validate" -- "$MB" validate "$tmp/home.json"
schema_check "$tmp/home.json" && ok || bad "python3-jsonschema rejects the receipt"

# 2. from inside another git repository (with a src/kernels/ of its own):
# nothing of it is read, and the commit is the binary's
mkdir -p "$tmp/other/src/kernels"
echo "int main(void) { return 0; }" >"$tmp/other/src/kernels/train.c"
if [ "$have_git" = 1 ]; then
	g init -q "$tmp/other" && g -C "$tmp/other" add -A && g -C "$tmp/other" commit -qm "a training repository"
fi
run_in "$tmp/other" "$tmp/other.json" && ok || { bad "run inside another repository: exit $?"; cat "$tmp/err" >&2; }
[ "$(jq_py "$tmp/other.json" "r['provenance'].get('commit')")" = "$binary_commit" ] && ok \
	|| bad "inside another repository the commit is not the binary's"
[ "$(jq_py "$tmp/other.json" "'checkout' in r['provenance']")" = False ] && ok || bad "another repository recorded as a checkout"
grep -q "differs from the sources" "$tmp/err" && bad "a checkout notice inside another repository" || ok

# 3. a copy of the checkout, first as built, then with a kernel edited:
# the notice names the file and the receipt records it; from a subfolder
mkdir "$tmp/copy"
cp -R "$SRC/meson.build" "$SRC/meson_options.txt" "$SRC/schemas" "$SRC/src" "$tmp/copy/"
copy_real=$(cd "$tmp/copy" && pwd -P)
run_in "$tmp/copy/src/harness" "$tmp/copy.json" && ok || bad "run in an unedited copy: exit $?"
[ "$(jq_py "$tmp/copy.json" "r['provenance']['checkout']['matches']")" = True ] && ok || bad "an unedited copy differs"
echo "/* edited after the build */" >>"$tmp/copy/src/kernels/relu2.cu"
run_in "$tmp/copy" "$tmp/edited.json" && ok || { bad "run in an edited copy: exit $?"; cat "$tmp/err" >&2; }
[ "$(jq_py "$tmp/edited.json" "r['provenance'].get('commit')")" = "$binary_commit" ] && ok \
	|| bad "in an edited checkout the commit is not the binary's"
grep -q "megabench: the checkout at $copy_real differs from the sources this megabench was built from .*src/kernels/relu2.cu modified" \
	"$tmp/err" && ok || bad "no notice naming relu2.cu: $(cat "$tmp/err")"
[ "$(jq_py "$tmp/edited.json" "r['provenance']['checkout']['differing']")" \
	= "[{'path': 'src/kernels/relu2.cu', 'change': 'modified'}]" ] && ok || bad "provenance.checkout.differing"
[ "$(jq_py "$tmp/edited.json" "sum('src/kernels/relu2.cu' in n for n in r['notices'])")" = 1 ] && ok \
	|| bad "the notice is not in the receipt's notices"
schema_check "$tmp/edited.json" && ok || bad "python3-jsonschema rejects the receipt with a checkout"
# more changes than a notice names: three, then a count; every kind of change
for f in a b c; do echo "/* new */" >"$tmp/copy/src/kernels/new_$f.cuh"; done
rm "$tmp/copy/src/kernels/vec.cuh"
run_in "$tmp/copy" "$tmp/many.json" && ok || bad "run in a copy with many changes: exit $?"
grep -q "src/kernels/new_a.cuh added, src/kernels/new_b.cuh added, src/kernels/new_c.cuh added and 2 more;" "$tmp/err" \
	&& ok || bad "notice of five changes: $(cat "$tmp/err")"
[ "$(jq_py "$tmp/many.json" "sorted(d['change'] for d in r['provenance']['checkout']['differing'])")" \
	= "['added', 'added', 'added', 'modified', 'removed']" ] && ok || bad "the five changes as recorded"

# 4. the build's generator: without git (commit unknown, blob ids from the
# bytes), unchanged output left alone (ninja's restat), a dirty tree
gen=$SRC/src/receipts/embed_provenance.py
"$PY" "$gen" "$tmp/copy" "$tmp/gen.c" && ok || bad "generator on a tree without git"
grep -q '^	.commit = NULL,$' "$tmp/gen.c" && ok || bad "a tree without git has a commit"
grep -q "{\"src/kernels/relu2.cu\", \"$(blob_id "$tmp/copy/src/kernels/relu2.cu")\", false}," "$tmp/gen.c" && ok \
	|| bad "without git, relu2.cu's blob id is not of its bytes"
before=$(stat -c %Y.%y "$tmp/gen.c")
sleep 1
"$PY" "$gen" "$tmp/copy" "$tmp/gen.c"
[ "$(stat -c %Y.%y "$tmp/gen.c")" = "$before" ] && ok || bad "the generator rewrote an unchanged output"
if [ "$have_git" = 1 ]; then
	g init -q "$tmp/copy" && g -C "$tmp/copy" add -A && g -C "$tmp/copy" commit -qm "as built"
	"$PY" "$gen" "$tmp/copy" "$tmp/clean.c"
	grep -q '^	.dirty = false,$' "$tmp/clean.c" && ! grep -q ', true},$' "$tmp/clean.c" && ok || bad "a clean tree is dirty"
	grep -q "^	.commit = \"$(git -C "$tmp/copy" rev-parse HEAD)\",$" "$tmp/clean.c" && ok || bad "the commit is not HEAD"
	echo "/* edited again */" >>"$tmp/copy/src/kernels/swiglu.cu"
	"$PY" "$gen" "$tmp/copy" "$tmp/dirty.c"
	grep -q '^	.dirty = true,$' "$tmp/dirty.c" && grep -q '^	.describe = ".*-dirty",$' "$tmp/dirty.c" && ok \
		|| bad "an edited tree is not dirty"
	[ "$(grep -c ', true},$' "$tmp/dirty.c")" = 1 ] && grep -q "{\"src/kernels/swiglu.cu\", \"$(blob_id \
		"$tmp/copy/src/kernels/swiglu.cu")\", true}," "$tmp/dirty.c" && ok || bad "the edited file is not the one modified"
	# a tree inside another repository is no checkout of its own
	mkdir -p "$tmp/other/vendor" && cp -R "$tmp/copy/src" "$tmp/other/vendor/"
	"$PY" "$gen" "$tmp/other/vendor" "$tmp/vendored.c"
	grep -q '^	.commit = NULL,$' "$tmp/vendored.c" && grep -q 'not a git checkout of its own' "$tmp/vendored.c" \
		&& ok || bad "a tree vendored in another repository took that repository's commit"
fi

# 5. receipts without binary provenance get statistics: the planted relu2
# slow-down (+3.6%) that the checkout's ids called identical code fails
expect 1 "gate of the planted relu2 receipts" -- "$MB" gate --baseline "$SRC/reports/h200/planted-relu2-base.json" \
	"$SRC/reports/h200/planted-relu2-plant16.json"
grep -Eq "^relu2/fused/.* SLOWER$" "$tmp/out" && ok || bad "relu2/fused is not SLOWER: $(cat "$tmp/out")"
grep -q "no binary provenance: statistics" "$tmp/out" && ok || bad "the gate does not say why it ran the statistics"

finish provenance_e2e
