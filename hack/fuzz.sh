#!/usr/bin/env bash
# Runs every fuzz target of the root module for a bounded time each ($1, default 10s).
set -euo pipefail
fuzztime=${1:-10s}
cd "$(dirname "$0")/.."
# Go 1.26's fuzzing coordinator can fail a target with a bare "context deadline exceeded"
# at the end of a -fuzztime duration, without any failing input: a race between its
# deadline and the workers' shutdown (go.dev/issue/75804, seen in this project's CI on
# FuzzDetachState). Go 1.27 fixed it, 1.26 has no fix, so fuzzing runs on a pinned 1.27
# toolchain, which the go command fetches through the module proxy once (about 70 MB).
export GOTOOLCHAIN=${FUZZ_GOTOOLCHAIN:-go1.27.4}
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
