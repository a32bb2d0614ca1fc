#!/usr/bin/env bash
# fuzz-all.sh runs every Fuzz target of the pure-Go packages for a short time
# each (default 10s): CI's quick pass over the decoders. Longer runs:
#   go test ./cache -run '^$' -fuzz FuzzDecodeDigest -fuzztime 10m
set -euo pipefail
t="${1:-10s}"
cd "$(dirname "$0")/.."
for pkg in $(go list ./... | grep -v -e '/infer/llama$' -e '/cmd/meshllm$'); do
  dir="$(go list -f '{{.Dir}}' "$pkg")"
  for f in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
    echo "fuzz $pkg $f ($t)"
    go test "$pkg" -run '^$' -fuzz "^$f\$" -fuzztime "$t" >/tmp/fuzz.$$.log 2>&1 || { cat /tmp/fuzz.$$.log; exit 1; }
  done
done
rm -f /tmp/fuzz.$$.log
