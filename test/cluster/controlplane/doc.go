// Package controlplane launches the Kubernetes control-plane programs (etcd,
// kube-apiserver, kube-scheduler, kube-controller-manager) for the test tooling.
//
// It owns two things every launcher shares:
//   - the command lines (EtcdArgs, APIServerArgs, SchedulerArgs, ControllerManagerArgs):
//     the flags common to every control plane started here; a caller appends only what is
//     its own;
//   - the readiness wait (WaitFor with HTTPCheck): poll a check until it passes, the
//     process dies or a timeout passes.
//
// Two process models use them. The local cluster (package localcluster) runs the
// programs as detached daemons with pid files that outlive the tool. The benchmark, scale
// and scheduler_perf harnesses run them here (Start, StartScheduler,
// StartControllerManager) as child processes on free loopback ports, with a PKI of their
// own, stopped when the harness ends.
package controlplane
