#!/usr/bin/env bash
# Creates a kind cluster with a mock DGX H100 node and installs rdma-dra-driver in mock mode.
#
#   demo/kind/up.sh            create everything (idempotent: an existing cluster is reused)
#   demo/kind/up.sh down       delete the cluster
#
# Needs Go (the version in go.mod), make, git, kind, kubectl, and docker or podman
# (CONTAINER_TOOL=podman, which also sets KIND_EXPERIMENTAL_PROVIDER). Writing character devices needs root: the script uses sudo
# for that one step when it is not root.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"

cluster=${CLUSTER_NAME:-rdma-dra}
profile=${MOCK_PROFILE:-dgx-h100}
mock_dir=_output/kind/mock          # kind-config.yaml mounts this (relative to $repo)
tool=${CONTAINER_TOOL:-docker}
image_repo=localhost/rdma-dra-driver
image_tag=${IMAGE_TAG:-dev}
toolbox=localhost/toolbox:latest
namespace=rdma-dra-driver
bin=_output/bin
if [ "$tool" = podman ]; then export KIND_EXPERIMENTAL_PROVIDER=podman; fi

log() { printf '==> %s\n' "$*" >&2; }

if [ "${1:-}" = down ]; then
	kind delete cluster --name "$cluster"
	exit 0
fi

for cmd in go make git kind kubectl "$tool"; do
	command -v "$cmd" >/dev/null || { echo "up.sh: $cmd not found (needed: go $(sed -n 's/^go //p' go.mod)+, make, git, kind, kubectl, $tool)" >&2; exit 1; }
done

log "building the binaries and helm"
make build
make "$bin/helm"

log "writing the mock node ($profile) to $mock_dir"
sudo=""
[ "$(id -u)" = 0 ] || sudo=sudo
# Replace the tree inside the directory, never the directory itself: a running kind node
# bind-mounts it, and a new directory in its place would leave the node an empty view.
mkdir -p "$mock_dir"
$sudo "$bin/rdma-dra" mock-node --profile "$profile" --out "$mock_dir" --mknod --force

log "building the images"
# The driver image for this machine's platform only, a plain image that kind can load.
make image ENGINE="$tool" IMAGE="$image_repo:$image_tag" PLATFORMS="linux/$(go env GOARCH)"
# The demo workloads only need sh, env, grep, ls and sleep.
"$tool" pull docker.io/library/busybox:stable
"$tool" tag docker.io/library/busybox:stable "$toolbox"

if kind get clusters | grep -qx "$cluster"; then
	log "cluster $cluster exists; reusing it"
else
	log "creating cluster $cluster"
	kind create cluster --name "$cluster" --config demo/kind/kind-config.yaml ${KIND_NODE_IMAGE:+--image "$KIND_NODE_IMAGE"}
fi

log "loading the images into the node"
for img in "$image_repo:$image_tag" "$toolbox"; do
	if [ "$tool" = podman ]; then
		archive=$(mktemp)
		podman save -o "$archive" "$img"
		kind load image-archive "$archive" --name "$cluster"
		rm -f "$archive"
	else
		kind load docker-image "$img" --name "$cluster"
	fi
done

log "installing the chart in mock mode"
kubectl create namespace "$namespace" --dry-run=client -o yaml | kubectl apply -f -
kubectl label namespace "$namespace" --overwrite pod-security.kubernetes.io/enforce=privileged
"$bin/helm" upgrade --install rdma-dra-driver deployments/helm/rdma-dra-driver \
	--namespace "$namespace" \
	--set image.repository="$image_repo" --set image.tag="$image_tag" --set image.pullPolicy=IfNotPresent \
	--set mock.enabled=true --wait --timeout 3m

log "published devices"
kubectl get resourceslices --field-selector spec.driver=rdma.dra.io \
	-o custom-columns=NAME:.metadata.name,NODE:.spec.nodeName,DEVICES:.spec.devices[*].name
cat >&2 <<MSG

The cluster is ready. Try a workload:
  kubectl apply -f demo/shared-port/claim-shared-by-two-pods.yaml
  kubectl -n rdma-demo-shared logs reader-a
More in demo/README.md. Delete the cluster with: demo/kind/up.sh down
MSG
