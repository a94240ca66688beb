# The real-kernel test tier (docs/kernel-tests.md): a Debian kernel with soft-RoCE under
# QEMU, built from the pinned packages of test/kernel/packages.lock.
# KERNEL_RUN=REGEXP selects tests in the VM; KERNEL_VM_TIMEOUT bounds the boot and tests.
KERNEL_RUN ?=
KERNEL_VM_TIMEOUT ?= 10m
KERNEL_VM_ACCEL ?= tcg

.PHONY: e2e-kernel
e2e-kernel: ## the real-kernel tier: boot a Debian kernel with soft-RoCE (rdma_rxe) under QEMU and run test/kernel/invm in it
	cd test && KERNEL_RUN='$(KERNEL_RUN)' KERNEL_VM_TIMEOUT='$(KERNEL_VM_TIMEOUT)' KERNEL_VM_ACCEL='$(KERNEL_VM_ACCEL)' \
	  $(GO) test -tags e2ekernel -count=1 -v -timeout 20m ./kernel/

.PHONY: e2e-kernel-lock
e2e-kernel-lock: ## pin the real-kernel VM's Debian packages at the apt sources' current versions (test/kernel/packages.lock)
	hack/kernel-vm-lock.sh

.PHONY: kernel-node-check
kernel-node-check: ## build _output/bin/rdma-dra-node-check: the read-only comparison of rdma-dra discover with rdma-core, for a real node
	@mkdir -p $(BIN_DIR)
	cd test && CGO_ENABLED=0 $(GO) test -c -tags kernelvm -trimpath -ldflags '-s -w' -o ../$(BIN_DIR)/rdma-dra-node-check ./kernel/invm
