#!/bin/bash
# Pack megabench executables built here, with the shared libraries a GPU
# host may lack (jansson, libgit2 and theirs), into one folder that runs
# there. Receipts made there carry the commit and source ids each binary was
# built from (the build embeds them), so no checkout travels along.
#
#   tests/gpu/bundle.sh OUT_DIR EXECUTABLE...
#
# OUT_DIR/bin   the executables
# OUT_DIR/lib   the libraries, except the C runtime and the CUDA, CUPTI,
#               cuBLAS and NCCL libraries (the host's driver-matched copies
#               are the ones to use)
# OUT_DIR/env.sh        source it on the host: LD_LIBRARY_PATH (the bundled
#                       libraries, then the host's CUDA ones) and PATH
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 OUT_DIR EXECUTABLE..." >&2; exit 64; }
out=$1
shift
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
# Provided by every host (the C runtime) or by the GPU host's toolkit; and
# MPI's (a -Dmpi=enabled build): the ranks must load the library of the
# host's own launcher, which talks to its daemons (Open MPI's soname,
# libmpi.so.40, is the same across 4.x).
host_libs='^(libc|libm|libdl|libpthread|librt|libutil|ld-linux.*|libstdc\+\+|libgcc_s|libcuda|libcudart|libcupti|libnccl|libnvidia.*|libcublas.*|libcublasLt|libmpi|libopen-rte|libopen-pal|libpmix|libhwloc|libevent.*|libfabric|libucp|libucs|libuct|libucm|libpsm.*|libibverbs|librdmacm|libnl.*|libefa)\.so'
for exe in "$@"; do
	cp -L "$exe" "$out/bin/"
	ldd "$exe" | awk '/=> \//{print $3}' | while read -r lib; do
		if ! grep -Eq "$host_libs" <<<"$(basename "$lib")"; then
			cp -Ln "$lib" "$out/lib/"
		fi
	done
done
cat >"$out/env.sh" <<'ENV'
# Source me on the GPU host (bash).
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dirs=$here/lib
for name in libcupti.so libnccl.so.2 libcublas.so libcudart.so; do
	f=$(find /usr/local/cuda/ /usr/local/cuda*/targets/*/lib /usr/lib/x86_64-linux-gnu -maxdepth 3 \
		-name "$name*" 2>/dev/null | head -n 1)
	if [ -n "$f" ]; then dirs=$dirs:$(dirname "$f"); fi
done
export LD_LIBRARY_PATH=$dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$here/bin:$PATH
ENV
du -sh "$out" | awk '{print "bundle: " $1 " in " $2}'
for exe in "$out"/bin/*; do
	missing=$(LD_LIBRARY_PATH=$out/lib ldd "$exe" | awk '/not found/{print $1}' | grep -Ev "$host_libs" || true)
	if [ -n "$missing" ]; then
		echo "bundle: $(basename "$exe") still misses: $missing" >&2
		exit 1
	fi
done
