#!/usr/bin/env bash
# fuzz-all.sh runs every Fuzz target of the pure-Go packages briefly: CI's
# quick pass over the decoders. The budget is a count of executions (default
# 20000x, 1-12 s a target here), not a duration: with a duration, Go 1.26's
# fuzz coordinator can report "context deadline exceeded" at the deadline
# on a loaded machine with no failing input (golang/go#75804, fixed in Go
# 1.27; it failed a clean-clone `make test` here). Longer runs:
#   go test ./cache -run '^$' -fuzz FuzzDecode -fuzztime 10m
set -euo pipefail
t="${1:-20000x}"
cd "$(dirname "$0")/.."
for pkg in $(go list ./... | grep -v -e '/infer/llama$' -e '/cmd/meshllm$'); do
  dir="$(go list -f '{{.Dir}}' "$pkg")"
  for f in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
    echo "fuzz $pkg $f ($t)"
    go test "$pkg" -run '^$' -fuzz "^$f\$" -fuzztime "$t" >/tmp/fuzz.$$.log 2>&1 || { cat /tmp/fuzz.$$.log; exit 1; }
  done
done
rm -f /tmp/fuzz.$$.log
