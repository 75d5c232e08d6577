#!/bin/bash
# A variant of megabench for a measurement: the objects of a build of this
# (clean) tree with one source file compiled from another version of it,
# and the provenance its receipts carry computed over the tree with that
# file replaced, so that they say "dirty" and name the variant's blob,
# not the committed one.
#
#   tests/gpu/variant.sh [--also PATH=FILE]... BUILD_DIR SRC VARIANT_FILE OUT_EXE [FLAG...]
#
# --also PATH=FILE  a file SRC includes (e.g. src/kernels/ssm_scan_sm90.cuh)
#            replaced too: SRC compiles against a copy of the tree with
#            every replacement in place, and the provenance names them all
# BUILD_DIR  a meson build of this tree at HEAD, built (ninja -C BUILD_DIR)
# SRC        the source's path in the tree, e.g. src/kernels/mhc_sinkhorn.cu
# VARIANT_FILE  the version of it to compile (it may be SRC itself when the
#            FLAGs alone make the variant: the receipts then name the
#            committed blob, and the FLAGs are what differs)
# OUT_EXE    where the executable goes
# FLAG...    added to SRC's compile command (e.g. -DMHC_MMA_CHAIN=2)
#
# Only SRC's object and the provenance object are rebuilt; the link is the
# build's own (ninja -t commands). Bundle the result with bundle.sh.
set -euo pipefail
usage="usage: $0 [--also PATH=FILE]... BUILD_DIR SRC VARIANT_FILE OUT_EXE [FLAG...]"
also=()
while [ "${1:-}" = --also ]; do
	[[ ${2:-} == ?*=?* ]] || { echo "$usage" >&2; exit 64; }
	also+=("$2")
	shift 2
done
[ $# -ge 4 ] || { echo "$usage" >&2; exit 64; }
build=$(cd "$1" && pwd)
src=$2
variant=$(cd "$(dirname "$3")" && pwd)/$(basename "$3")
out=$(cd "$(dirname "$4")" && pwd)/$(basename "$4")
shift 4
root=$(git -C "$build/.." rev-parse --show-toplevel)
[ -f "$root/$src" ] || { echo "$0: $src: no such file in $root" >&2; exit 2; }
for pair in "${also[@]}"; do
	[ -f "$root/${pair%%=*}" ] || { echo "$0: ${pair%%=*}: no such file in $root" >&2; exit 2; }
	[ -f "${pair#*=}" ] || { echo "$0: ${pair#*=}: no such file" >&2; exit 2; }
done
if ! grep -qF "$(git -C "$root" rev-parse HEAD)" "$build/src/receipts/mb_build_provenance.c" 2>/dev/null; then
	echo "$0: $build is not a build of HEAD (ninja -C $build)" >&2
	exit 2
fi
if ! git -C "$root" diff --quiet HEAD --; then
	echo "$0: $root has uncommitted changes: the build's other objects would not be HEAD's" >&2
	exit 2
fi
tmp=$(mktemp -d)
cleanup() {
	git -C "$root" worktree remove --force "$tmp/tree" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

# SRC's compile command, and the provenance file's, from the build's database
commands=$(python3 - "$build/compile_commands.json" "$src" <<'PY'
import json, sys
db = json.load(open(sys.argv[1]))
def find(suffix):
    hits = [c for c in db if c["file"].endswith(suffix)]
    if len(hits) != 1:
        sys.exit("%d compile commands for %s" % (len(hits), suffix))
    return hits[0]
for c in (find("/" + sys.argv[2].lstrip("/")), find("/mb_build_provenance.c")):
    print(c["output"])
    print(c["command"])
PY
)
src_obj=$(sed -n 1p <<<"$commands")
src_cmd=$(sed -n 2p <<<"$commands")
prov_obj=$(sed -n 3p <<<"$commands")
prov_cmd=$(sed -n 4p <<<"$commands")

# the tree with SRC (and each --also PATH) replaced
git -C "$root" worktree add --quiet --detach "$tmp/tree" HEAD
cp "$variant" "$tmp/tree/$src"
for pair in "${also[@]}"; do
	cp "${pair#*=}" "$tmp/tree/${pair%%=*}"
done

# the variant's object: compiled in that tree, whose src/ is searched first
# for the includes
src_cmd=${src_cmd/-o $src_obj /-o $tmp/variant.o }
src_cmd=${src_cmd/-c ..\/$src/-c $tmp/tree/$src}
[[ $src_cmd == *"-o $tmp/variant.o"* && $src_cmd == *"-c $tmp/tree/$src"* ]] ||
	{ echo "$0: cannot rewrite the compile command of $src" >&2; exit 2; }
src_cmd=${src_cmd/ / -I$tmp/tree/src }
(cd "$build" && eval "$src_cmd $*")

# the provenance of that tree
python3 "$root/src/receipts/embed_provenance.py" "$tmp/tree" "$tmp/provenance.c"
prov_src=$(sed -E 's/.* -c ([^ ]+).*/\1/' <<<"$prov_cmd")
prov_cmd=${prov_cmd/-o $prov_obj /-o $tmp/provenance.o }
prov_cmd=${prov_cmd/-c $prov_src/-c $tmp/provenance.c}
(cd "$build" && eval "$prov_cmd")

# the build's archives with those two members replaced, and its link
link=$(cd "$build" && ninja -t commands megabench | tail -n 1)
for lib in libmbcuda.a libmbcore.a; do
	(cd "$build" && ar t "$lib" | grep -vxF -e "$src_obj" -e "$prov_obj" | xargs ar rcs "$tmp/$lib")
	(cd "$build" && ar t "$lib" | grep -qxF -e "$src_obj") && ar rs "$tmp/$lib" "$tmp/variant.o" >/dev/null
	(cd "$build" && ar t "$lib" | grep -qxF -e "$prov_obj") && ar rs "$tmp/$lib" "$tmp/provenance.o" >/dev/null
	link=${link/-Xlinker=$lib/-Xlinker=$tmp/$lib}
done
link=${link/-o megabench /-o $out }
(cd "$build" && eval "$link")
echo "$out"
