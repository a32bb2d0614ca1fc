#!/usr/bin/env bash
# docker-image.sh — build the Docker image meshllm:local without a registry.
#
#   scripts/docker-image.sh [TAG]      (make image)
#
# The image is FROM scratch: bin/meshllm (built with `make build`), every
# shared library `ldd` lists for it, the dynamic loader, and the
# stories260K model at /models/stories260K.gguf. Nothing is pulled.
#
# Environment:
#   MESHLLM_IMAGE       image tag (default meshllm:local; TAG wins)
#   MESHLLM_MODEL_FILE  GGUF copied into the image (default ../shared/models/stories260K.gguf)
#   MESHLLM_SKIP_BUILD  1: use bin/meshllm as it is, do not run `make build`
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
tag=${1:-${MESHLLM_IMAGE:-meshllm:local}}
model=${MESHLLM_MODEL_FILE:-$root/../shared/models/stories260K.gguf}

command -v docker >/dev/null || { echo "docker-image.sh: docker is not installed" >&2; exit 1; }
[[ -f $model ]] || { echo "docker-image.sh: no model at $model (set MESHLLM_MODEL_FILE)" >&2; exit 1; }
if [[ ${MESHLLM_SKIP_BUILD:-0} != 1 ]]; then
	make build >&2
fi
[[ -x bin/meshllm ]] || { echo "docker-image.sh: bin/meshllm is missing: run make build" >&2; exit 1; }

# A staging directory per run, so that concurrent builds do not mix.
stage=$(mktemp -d "${TMPDIR:-/tmp}/meshllm-image.XXXXXX")
trap 'rm -rf "$stage"' EXIT
rootfs=$stage/rootfs
mkdir -p "$rootfs/usr/local/bin" "$rootfs/models" "$rootfs/data" "$rootfs/tmp" "$rootfs/etc"
chmod 1777 "$rootfs/tmp"
chmod 700 "$rootfs/data"
cp bin/meshllm "$rootfs/usr/local/bin/meshllm"
cp "$model" "$rootfs/models/stories260K.gguf"
chmod 644 "$rootfs/models/stories260K.gguf"

# Libraries and the loader, at the paths ldd resolved them to (symlinks
# followed: the image holds the real files under the names the binary asks
# for). "linux-vdso.so.1" has no file and is skipped.
libs=$(ldd bin/meshllm | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' | sort -u)
[[ -n $libs ]] || { echo "docker-image.sh: ldd listed no libraries; is bin/meshllm dynamic?" >&2; exit 1; }
for lib in $libs; do
	mkdir -p "$rootfs$(dirname "$lib")"
	cp -L "$lib" "$rootfs$lib"
done
# Enough of /etc for a process that looks itself up (user root, group root).
echo 'root:x:0:0:root:/data:/usr/local/bin/meshllm' >"$rootfs/etc/passwd"
echo 'root:x:0:' >"$rootfs/etc/group"

cp docker/Dockerfile "$stage/Dockerfile"
version=$(git describe --always --dirty 2>/dev/null || echo dev)
docker build --quiet --label "org.opencontainers.image.version=$version" \
	--label "org.opencontainers.image.title=meshllm" -t "$tag" "$stage" >/dev/null
echo "built $tag ($(du -sh "$rootfs" | cut -f1) root filesystem: bin/meshllm, $(wc -w <<<"$libs") libraries, stories260K)" >&2
echo "$tag"
