#!/usr/bin/env bash
# engine-env.sh prepares everything the cgo llama.cpp engine needs and prints
# the environment (as `export` lines) that builds it with SIMD.
#
#   eval "$(scripts/engine-env.sh)"
#
# It installs the Debian packages that carry headers the ollama module zip
# lacks (nlohmann/json, stb_image) when it runs as root and they are missing,
# puts miniaudio.h (shipped by the github.com/gen2brain/malgo module) under
# .build/include/miniaudio/, and chooses compiler flags for this CPU:
#
#   x86-64 with AVX2+FMA+F16C  -O3 -mavx2 -mfma -mf16c   (default)
#   older x86-64                -O3 (SSE2 baseline)        (MESHLLM_SIMD=off forces it)
#   arm64 / aarch64             -O3 (NEON is baseline), plus dotprod+fp16 where the CPU has them
#   macOS                       -O3; Metal comes from ggml's darwin build tags
#
# -march=native is not used: it enables AMX on some CPUs and fails to link.
# Messages go to stderr; stdout carries only the export lines.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
say() { echo "engine-env: $*" >&2; }

missing=()
[ -f /usr/include/nlohmann/json.hpp ] || missing+=(nlohmann-json3-dev)
[ -f /usr/include/stb/stb_image.h ] || missing+=(libstb-dev)
if [ "$(uname -s)" = Linux ] && ! command -v g++ >/dev/null; then missing+=(g++); fi
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    say "installing ${missing[*]} (Debian packages)"
    apt-get install -y -q "${missing[@]}" >&2 || { apt-get update -q >&2 && apt-get install -y -q "${missing[@]}" >&2; }
  else
    say "MISSING: ${missing[*]}; install them (Debian/Ubuntu: sudo apt-get install ${missing[*]}; macOS: brew install nlohmann-json stb) and rerun"
    exit 1
  fi
fi

inc="$root/.build/include"
if [ ! -f "$inc/miniaudio/miniaudio.h" ]; then
  malgo_version="v0.11.24"
  dir="$(cd "$root" && go mod download -json "github.com/gen2brain/malgo@$malgo_version" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')"
  [ -f "$dir/miniaudio.h" ] || { say "MISSING: miniaudio.h (go mod download github.com/gen2brain/malgo@$malgo_version failed)"; exit 1; }
  mkdir -p "$inc/miniaudio"
  cp "$dir/miniaudio.h" "$inc/miniaudio/miniaudio.h"
fi

flags="-O3"
case "$(uname -m)" in
  x86_64|amd64)
    if [ "${MESHLLM_SIMD:-auto}" != off ] && { grep -qw avx2 /proc/cpuinfo 2>/dev/null && grep -qw fma /proc/cpuinfo && grep -qw f16c /proc/cpuinfo; } ; then
      flags="-O3 -mavx2 -mfma -mf16c"
    elif [ "$(uname -s)" = Darwin ] && sysctl -n machdep.cpu.leaf7_features 2>/dev/null | grep -qw AVX2 && [ "${MESHLLM_SIMD:-auto}" != off ]; then
      flags="-O3 -mavx2 -mfma -mf16c"
    else
      say "CPU lacks AVX2/FMA/F16C (or MESHLLM_SIMD=off): building ggml for baseline x86-64; expect a slower engine"
    fi ;;
  aarch64|arm64)
    # NEON is baseline on arm64. Linux CPUs with the dot-product and fp16
    # extensions (Graviton2+, Ampere, Raspberry Pi 5) get them enabled;
    # macOS's clang already targets the Apple cores.
    if [ "$(uname -s)" = Linux ] && [ "${MESHLLM_SIMD:-auto}" != off ] && grep -qw asimddp /proc/cpuinfo 2>/dev/null && grep -qw fphp /proc/cpuinfo; then
      flags="-O3 -march=armv8.2-a+dotprod+fp16"
    fi ;;
esac

echo "export CGO_ENABLED=1"
echo "export CGO_CPPFLAGS='-I$inc'"
echo "export CGO_CFLAGS='$flags'"
echo "export CGO_CXXFLAGS='$flags'"
