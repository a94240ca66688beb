#!/usr/bin/env bash
# Runs every fuzz target of the root module for a bounded time each ($1, default 10s).
set -euo pipefail
fuzztime=${1:-10s}
cd "$(dirname "$0")/.."
found=0
while IFS=: read -r file name; do
  pkg=./$(dirname "$file")
  echo "fuzz $pkg $name for $fuzztime"
  go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$pkg"
  found=$((found + 1))
done < <(git ls-files '*_test.go' | xargs grep -Ho '^func Fuzz[A-Za-z0-9_]*' | sed 's/func //' | sort)
if [ "$found" -eq 0 ]; then
  echo "no fuzz targets found" >&2
  exit 1
fi
echo "fuzzed $found targets"
