//go:build kernelvm

package invm

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/netattach"
	"github.com/rdma-dra/rdma-dra-driver/test/kernel/rdmacore"
)

// newNetns creates a named network namespace, deleted when the test ends, and returns
// its path.
func newNetns(t *testing.T, name string) string {
	t.Helper()
	run(t, "ip", "netns", "add", name)
	t.Cleanup(func() { _, _ = tryRun("ip", "netns", "del", name) })
	return "/run/netns/" + name
}

// noJournal keeps attachments in memory only: nothing crashes here.
func noJournal(netattach.State) error { return nil }

// pod is one attachment of the test.
type pod struct {
	name, netns string
	addr        netip.Addr
	state       netattach.State
}

// TestAttachRoCE runs the network attachment against the real kernel: a macvlan child
// of the soft-RoCE port's netdev in each of two pod namespaces, the kernel's own GID
// entry for each pod address found at the index the container would get in
// NCCL_IB_GID_INDEX, a verbs client in each pod taking a QP to RTR with that index, and
// teardown removing the entries.
func TestAttachRoCE(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	r := newRoCE(t, "rxe3", "veth3", "veth3p")
	host := netip.MustParseAddr("192.168.79.1")
	run(t, "ip", "addr", "add", host.String()+"/24", "dev", r.Netdev)
	att := netattach.NewAttacher(netattach.Options{Kernel: netattach.NewSysfsKernel("/sys")})

	pods := []*pod{
		{name: "pod1", addr: netip.MustParseAddr("192.168.79.11")},
		{name: "pod2", addr: netip.MustParseAddr("192.168.79.12")},
	}
	for _, p := range pods {
		p.netns = newNetns(t, p.name)
		spec := netattach.Spec{
			Mode: netattach.ModeMacvlan, HostNetdev: r.Netdev, PodIfName: "net1",
			Addresses: []netip.Prefix{netip.PrefixFrom(p.addr, 24)},
			IBDevice:  r.IBDev, IBPort: 1,
		}
		st, err := att.Attach(ctx, spec, netattach.Target{PodUID: p.name, NetnsPath: p.netns}, noJournal)
		if err != nil {
			t.Fatalf("attach %s: %v", p.name, err)
		}
		p.state = st
		t.Cleanup(func() { _ = att.Detach(ctx, p.state, noJournal) })
		if st.GIDIndex == nil {
			t.Fatalf("attach %s: no GID index in %+v", p.name, st)
		}
		t.Logf("%s: %s on net1, GID index %d", p.name, p.addr, *st.GIDIndex)
	}

	t.Run("GID index is the kernel's entry of the pod address", func(t *testing.T) {
		_, port := readDevinfo(t).port(r.IBDev, 1)
		table, err := discovery.ReadGIDTable("/sys", r.IBDev, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods {
			g := gidAt(port.GIDs, *p.state.GIDIndex)
			if g == nil || g.Addr != netip.AddrFrom16(p.addr.As16()) || g.Type != "RoCE v2" {
				t.Errorf("%s: ibv_devinfo's GID[%d] is %+v, want %s RoCE v2", p.name, *p.state.GIDIndex, g, netip.AddrFrom16(p.addr.As16()))
			}
			for _, e := range table.Entries {
				if e.Index == *p.state.GIDIndex && e.Netdev != "net1" {
					t.Errorf("%s: GID %d belongs to %q, want the pod's net1", p.name, e.Index, e.Netdev)
				}
			}
			// What a process in the pod sees of the table.
			inPod := run(t, "ip", "netns", "exec", p.name, "ibv_devinfo", "-v", "-d", r.IBDev)
			devs, err := rdmacore.ParseDevinfo(inPod)
			if err != nil || len(devs) != 1 || len(devs[0].Ports) != 1 {
				t.Fatalf("ibv_devinfo in %s: %v, %d devices", p.name, err, len(devs))
			}
			if g := gidAt(devs[0].Ports[0].GIDs, *p.state.GIDIndex); g == nil || g.Addr.Unmap() != p.addr {
				t.Errorf("in %s, ibv_devinfo's GID[%d] is %+v, want %s", p.name, *p.state.GIDIndex, g, p.addr)
			}
			t.Logf("GID table as %s sees it: %v", p.name, devs[0].Ports[0].GIDs)
		}
	})

	t.Run("a verbs client in each pod takes a QP to RTR with its index", func(t *testing.T) {
		server, client := pods[0], pods[1]
		srv := pingpong(server.name, r.IBDev, *server.state.GIDIndex, "")
		waitListening(t, server.name, 18515)
		cli := pingpong(client.name, r.IBDev, *client.state.GIDIndex, server.addr.String())
		cliOut := cli.wait(20 * time.Second)
		srvOut := srv.wait(5 * time.Second)
		t.Logf("server in %s:\n%s\nclient in %s:\n%s", server.name, srvOut, client.name, cliOut)
		// The server takes its QP to RTR with the client's address before it sends its own
		// (rc_pingpong's pp_server_exch_dest), so the client's "remote address" line
		// proves the server's transition too: the server's own output is block-buffered
		// into a pipe and lost when it is killed waiting for traffic that rxe does not
		// deliver between namespaces.
		for _, want := range []string{
			"local address:  LID 0x0000, QPN ",
			"GID " + netip.AddrFrom16(client.addr.As16()).String() + "\n",
			"remote address: LID 0x0000, QPN ",
			"GID " + netip.AddrFrom16(server.addr.As16()).String() + "\n",
		} {
			if !strings.Contains(cliOut, want) {
				t.Errorf("client in %s: no %q in its output", client.name, want)
			}
		}
		for _, bad := range []string{"Failed to modify QP", "Couldn't connect", "Couldn't get"} {
			if strings.Contains(cliOut, bad) {
				t.Errorf("client in %s: %q: the QP did not reach RTR with GID index %d", client.name, bad, *client.state.GIDIndex)
			}
		}
	})

	t.Run("a GID index outside the pod is refused", func(t *testing.T) {
		// The control: the host's own entry (its netdev is in the host namespace)
		// used from a pod.
		_, port := readDevinfo(t).port(r.IBDev, 1)
		hostIdx := -1
		for _, g := range port.GIDs {
			if g.Addr.Unmap() == host {
				hostIdx = g.Index
			}
		}
		if hostIdx < 0 {
			t.Fatalf("no GID entry for the host address %s in %v", host, port.GIDs)
		}
		server, client := pods[0], pods[1]
		srv := pingpong(server.name, r.IBDev, *server.state.GIDIndex, "")
		waitListening(t, server.name, 18515)
		cliOut := pingpong(client.name, r.IBDev, hostIdx, server.addr.String()).wait(20 * time.Second)
		srvOut := srv.wait(5 * time.Second)
		t.Logf("server:\n%s\nclient with the host's GID index %d:\n%s", srvOut, hostIdx, cliOut)
		// The kernel refuses a GID whose netdev is in another namespace than the
		// process (the host's veth3 from pod2): the index must be the pod's own.
		if !strings.Contains(cliOut, "Failed to modify QP to RTR") {
			t.Errorf("a pod took a QP to RTR with the host's GID index %d", hostIdx)
		}
	})

	t.Run("detach removes the pod's GID entries", func(t *testing.T) {
		for _, p := range pods {
			if err := att.Detach(ctx, p.state, noJournal); err != nil {
				t.Fatalf("detach %s: %v", p.name, err)
			}
		}
		eventually(t, "the pod GIDs leave the table", func() (bool, string) {
			_, port := readDevinfo(t).port(r.IBDev, 1)
			for _, g := range port.GIDs {
				for _, p := range pods {
					if g.Addr.Unmap() == p.addr {
						return false, fmt.Sprintf("GID[%d] %s still there", g.Index, g.Addr)
					}
				}
			}
			return true, ""
		})
		for _, p := range pods {
			if out := run(t, "ip", "-n", p.name, "-o", "link", "show"); strings.Contains(out, "net1") {
				t.Errorf("%s still has net1:\n%s", p.name, out)
			}
		}
	})
}

func gidAt(gids []rdmacore.GID, idx int) *rdmacore.GID {
	for i := range gids {
		if gids[i].Index == idx {
			return &gids[i]
		}
	}
	return nil
}

// process is a tool running in the background with its output collected.
type process struct {
	cmd    *exec.Cmd
	out    *strings.Builder
	cancel context.CancelFunc
	done   chan struct{}
}

// pingpong starts rdma-core's ibv_rc_pingpong in a pod namespace: a server when peer is
// empty, else a client of peer. One iteration: what matters is the QP setup.
func pingpong(netns, ibdev string, gidIndex int, peer string) *process {
	args := []string{"netns", "exec", netns, "ibv_rc_pingpong", "-d", ibdev, "-i", "1", "-g", fmt.Sprint(gidIndex), "-n", "1"}
	if peer != "" {
		args = append(args, peer)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &process{cmd: exec.CommandContext(ctx, "ip", args...), out: &strings.Builder{}, cancel: cancel, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		fmt.Fprintf(p.out, "start: %v", err)
		close(p.done)
		return p
	}
	go func() {
		err := p.cmd.Wait()
		fmt.Fprintf(p.out, "[exit: %v]", err)
		close(p.done)
	}()
	return p
}

// wait waits up to d for the process to end, then kills it, and returns its output.
// Traffic between rxe QPs in two namespaces does not complete (rxe receives RoCE packets
// in the initial namespace only), so a server may wait forever for its message.
func (p *process) wait(d time.Duration) string {
	select {
	case <-p.done:
	case <-time.After(d):
		p.cancel()
		<-p.done
		p.out.WriteString(" [killed after " + d.String() + "]")
	}
	p.cancel()
	return p.out.String()
}

// waitListening waits until a TCP port listens in a namespace.
func waitListening(t *testing.T, netns string, port int) {
	t.Helper()
	hex := fmt.Sprintf(":%04X ", port)
	eventually(t, fmt.Sprintf("TCP port %d listening in %s", port, netns), func() (bool, string) {
		out, err := tryRun("ip", "netns", "exec", netns, "cat", "/proc/net/tcp", "/proc/net/tcp6")
		if err != nil {
			return false, err.Error()
		}
		for _, l := range strings.Split(out, "\n") {
			f := strings.Fields(l)
			if len(f) > 3 && strings.HasSuffix(f[1]+" ", hex) && f[3] == "0A" {
				return true, ""
			}
		}
		return false, "not listening yet"
	})
}
