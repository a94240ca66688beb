# What the GitHub workflows (.github/workflows) need besides the other targets, so that
# every step they take is a make target that also runs on a workstation.

# The Debian packages of the local cluster (test/cluster/host/packages.txt) and of CI's
# other steps (.ci/packages.txt: buildah for image-test, QEMU for e2e-kernel), the first
# word of each line, as .ci/run installs them.
HOST_PACKAGE_LISTS := test/cluster/host/packages.txt .ci/packages.txt

.PHONY: host-packages
host-packages: ## install the Debian packages of test/cluster/host/packages.txt and .ci/packages.txt with apt-get (root): what image-test, e2e and e2e-kernel run
	@command -v apt-get >/dev/null || { echo "make host-packages needs Debian or Ubuntu (apt-get)" >&2; exit 1; }
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	  $$(awk '$$1 != "" && $$1 !~ /^#/ {print $$1}' $(HOST_PACKAGE_LISTS)) >/dev/null
