#!/usr/bin/env bash
# Builds the driver image from the Containerfile with podman, buildah or docker, and pushes
# it: `make image` and `make push` (docs/release.md). make cross-compiles the binaries into
# the build context first (make image-binaries).
#
#   hack/image.sh build|push
#
# Environment (make passes its variables):
#   IMAGE          the reference to tag and push, e.g. ghcr.io/rdma-dra/rdma-dra-driver:v0.1.0 (required)
#   PLATFORMS      comma-separated, default linux/amd64,linux/arm64. With several, podman and
#                  buildah build a manifest list named IMAGE and push it with `manifest push
#                  --all`; docker builds with buildx, keeps the result in its build cache, and
#                  builds again from the cache with --push on push. With one, every engine
#                  makes a plain local image (e.g. to load into kind).
#   ENGINE         podman, buildah or docker; default: the first of these that is installed
#   BASE_IMAGE     overrides the Containerfile's pinned base (e.g. oci-archive:/path/base.tar)
#   VERSION, GIT_COMMIT   the image's version and revision labels
#   CONTEXT        the build context with linux_<arch>/ binaries, default _output/image
#   CONTAINERFILE  default Containerfile
#   DIGEST_FILE    push writes the digest it pushed there (sha256:..., the index's for
#                  several platforms), for signing by digest; default: none
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { echo "usage: IMAGE=ref [PLATFORMS=...] [ENGINE=podman|buildah|docker] $0 build|push" >&2; exit 2; }
verb=${1:-}
[ "$verb" = build ] || [ "$verb" = push ] || usage
: "${IMAGE:?IMAGE is required, e.g. IMAGE=ghcr.io/rdma-dra/rdma-dra-driver:v0.1.0}"
platforms=${PLATFORMS:-linux/amd64,linux/arm64}
context=${CONTEXT:-_output/image}
containerfile=${CONTAINERFILE:-Containerfile}

engine=${ENGINE:-}
if [ -z "$engine" ]; then
	for e in podman buildah docker; do
		if command -v "$e" >/dev/null; then engine=$e; break; fi
	done
	[ -n "$engine" ] || { echo "image.sh: none of podman, buildah or docker is installed (or set ENGINE); on Debian or Ubuntu: apt-get install --no-install-recommends buildah" >&2; exit 1; }
fi
case $engine in podman | buildah | docker) ;; *) echo "image.sh: ENGINE=$engine: want podman, buildah or docker" >&2; exit 2 ;; esac

multi=false
case $platforms in *,*) multi=true ;; esac

args=(--platform "$platforms" -f "$containerfile"
	--build-arg "VERSION=${VERSION:-v0.0.0-dev}" --build-arg "GIT_COMMIT=${GIT_COMMIT:-unknown}")
[ -z "${BASE_IMAGE:-}" ] || args+=(--build-arg "BASE_IMAGE=$BASE_IMAGE")

if [ "$verb" = build ] || [ "$engine" = docker ]; then
	for p in ${platforms//,/ }; do
		arch=${p#*/}
		arch=${arch%%/*}
		[ -d "$context/linux_$arch" ] || { echo "image.sh: no binaries for $p in $context/linux_$arch (make image-binaries PLATFORMS=$platforms)" >&2; exit 1; }
	done
fi

digest_file=${DIGEST_FILE:-}
digest_args=()
if [ "$verb" = push ] && [ -n "$digest_file" ]; then
	mkdir -p "$(dirname "$digest_file")"
	rm -f "$digest_file"
	digest_args=(--digestfile "$digest_file")
fi

echo "image.sh: $verb $IMAGE for $platforms with $engine" >&2
case $verb:$engine:$multi in
build:podman:true | build:buildah:true)
	# --manifest adds to an existing list of that name: start from an empty one.
	"$engine" manifest rm "$IMAGE" >/dev/null 2>&1 || true
	"$engine" build "${args[@]}" --manifest "$IMAGE" "$context"
	;;
build:podman:false | build:buildah:false)
	"$engine" build "${args[@]}" -t "$IMAGE" "$context"
	;;
build:docker:true)
	docker buildx build "${args[@]}" -t "$IMAGE" "$context"
	echo "image.sh: docker keeps a multi-platform build in its build cache; make push builds it again from the cache and pushes it" >&2
	;;
build:docker:false)
	docker build "${args[@]}" -t "$IMAGE" "$context"
	;;
push:podman:true | push:buildah:true)
	"$engine" manifest push --all ${digest_args[@]+"${digest_args[@]}"} "$IMAGE" "docker://$IMAGE"
	;;
push:podman:false | push:buildah:false)
	"$engine" push ${digest_args[@]+"${digest_args[@]}"} "$IMAGE" "docker://$IMAGE"
	;;
push:docker:true)
	metadata=$(mktemp)
	trap 'rm -f "$metadata"' EXIT
	docker buildx build "${args[@]}" -t "$IMAGE" --push --metadata-file "$metadata" "$context"
	if [ -n "$digest_file" ]; then
		sed -n 's/.*"containerimage.digest": *"\(sha256:[0-9a-f]*\)".*/\1/p' "$metadata" | head -n 1 >"$digest_file"
	fi
	;;
push:docker:false)
	docker push "$IMAGE"
	if [ -n "$digest_file" ]; then
		ref=$(docker inspect --format '{{index .RepoDigests 0}}' "$IMAGE")
		echo "${ref#*@}" >"$digest_file"
	fi
	;;
esac
if [ -n "$digest_file" ] && [ "$verb" = push ]; then
	grep -q '^sha256:[0-9a-f]\{64\}$' "$digest_file" 2>/dev/null ||
		{ echo "image.sh: pushed $IMAGE but found no digest for $digest_file" >&2; exit 1; }
	echo "image.sh: pushed $IMAGE@$(cat "$digest_file")" >&2
fi
