#!/bin/bash
# On a GPU host, give receipts their provenance without touching the copied
# working tree's own .git: clone the bundle's commit (tests/gpu/bundle.sh)
# into DIR and lay the working tree's files over it, so that DIR has the
# commit, the same bytes and therefore the same dirty flag and blob ids.
#
#   tests/gpu/host-checkout.sh BUNDLE_DIR DIR [--commit-only]
#   export MEGABENCH_SOURCE_DIR=DIR
#
# --commit-only leaves the working tree out: for binaries built from a
# clean export of that very commit while the working tree sent along holds
# other, unfinished edits that the binaries do not contain.
set -euo pipefail
[ $# -eq 2 ] || [ $# -eq 3 ] && [ "${3:---commit-only}" = --commit-only ] ||
	{ echo "usage: $0 BUNDLE_DIR DIR [--commit-only]" >&2; exit 64; }
bundle=$1
dir=$2
[ -f "$bundle/repo.bundle" ] || { echo "$0: $bundle/repo.bundle: no git bundle (made outside a checkout?)" >&2; exit 1; }
rm -rf "$dir"
git clone -q --no-checkout "$bundle/repo.bundle" "$dir"
git -C "$dir" checkout -q --detach "$(cat "$bundle/commit")"
# tracked files as the working tree has them; build outputs, bundles and
# .git stay out
if [ $# -eq 2 ]; then
	tar --exclude=./.git --exclude='./build*' --exclude="./$(basename "$bundle")" -cf - . | tar -xf - -C "$dir"
fi
echo "$dir: $(git -C "$dir" describe --always --dirty)"
