#!/usr/bin/env bash
# Pins the real-kernel VM's Debian packages (test/kernel/packages.lock) at the versions
# the machine's apt sources offer now: make e2e-kernel-lock. The kernel is the ABI
# package linux-image-amd64 depends on. Run apt-get update first.
set -euo pipefail
cd "$(dirname "$0")/.."
# The tools the tests run, the verbs provider of rxe, runc, busybox for /init, and the
# libraries the tools link (test/kernel/vm refuses an image that needs one not listed).
packages=(
  busybox-static iproute2 ibverbs-utils ibverbs-providers libibverbs1 runc
  libc6 libmnl0 libbsd0 libmd0 libcap2 libbpf1 libelf1 zlib1g libnl-3-200 libnl-route-3-200 libseccomp2
)
candidate() {
  local v
  v=$(apt-cache policy "$1" | awk '/Candidate:/ {print $2}')
  if [ -z "$v" ] || [ "$v" = "(none)" ]; then
    echo "no candidate version of $1 in the apt sources (apt-get update?)" >&2
    exit 1
  fi
  echo "$v"
}
kernel=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
if [ -z "$kernel" ]; then
  echo "linux-image-amd64 depends on no linux-image-<abi> package (apt-get update?)" >&2
  exit 1
fi
{
  echo "# The real-kernel VM's Debian packages (docs/kernel-tests.md), pinned by"
  echo "# hack/kernel-vm-lock.sh (make e2e-kernel-lock) from $(. /etc/os-release && echo "$PRETTY_NAME")."
  echo "$kernel $(candidate "$kernel")"
  for p in "${packages[@]}"; do
    echo "$p $(candidate "$p")"
  done
} > test/kernel/packages.lock
cat test/kernel/packages.lock
