package scale

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/klog/v2"

	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
)

// APIFigures are the simulated plugins' cost to the API server.
type APIFigures struct {
	Nodes int `json:"nodes"`
	// Plugins is how many nodes' plugins ran while the traffic was counted: every node
	// up to maxRunningPlugins, an even sample of them above.
	Plugins int `json:"plugins"`
	// IdleSeconds is how long the plugins were left alone; IdleRequestsPerNodePerMin is
	// what they sent in that time (0 is the goal: a quiet node causes no traffic).
	IdleSeconds               float64 `json:"idle_seconds"`
	IdleRequestsPerNodePerMin float64 `json:"idle_requests_per_node_per_min"`
	// Flaps ports went down and up again, one node at a time, each change rescanned
	// through the plugin's Publisher; RequestsPerFlap is what one down-up cost.
	Flaps           int     `json:"flaps"`
	RequestsPerFlap float64 `json:"requests_per_flap"`
}

// SliceFigures are the size of one node's slices as the API server stores them.
type SliceFigures struct {
	Model Model `json:"model"`
	// Slices and Devices per node; ProtobufBytesPerNode is the slices' size in the
	// protobuf encoding the API server stores in etcd, JSONBytesPerNode in JSON.
	Slices               float64 `json:"slices_per_node"`
	Devices              float64 `json:"devices_per_node"`
	ProtobufBytesPerNode float64 `json:"protobuf_bytes_per_node"`
	JSONBytesPerNode     float64 `json:"json_bytes_per_node"`
}

// sliceFigures reads every slice of the driver back from the API server.
func (c *Cluster) sliceFigures(ctx context.Context) (SliceFigures, error) {
	n := float64(len(c.nodes))
	f := SliceFigures{Model: c.model}
	// In pages: at thousands of nodes the legacy model's slices are hundreds of
	// megabytes.
	opts := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.driver", devicemodel.DefaultDriverName).String(), Limit: 500}
	for {
		list, err := c.cp.Client.ResourceV1().ResourceSlices().List(ctx, opts)
		if err != nil {
			return SliceFigures{}, fmt.Errorf("list slices: %w", err)
		}
		f.Slices += float64(len(list.Items)) / n
		for i := range list.Items {
			s := &list.Items[i]
			f.Devices += float64(len(s.Spec.Devices)) / n
			f.ProtobufBytesPerNode += float64(s.Size()) / n
			js, err := json.Marshal(s)
			if err != nil {
				return f, fmt.Errorf("encode slice %s: %w", s.Name, err)
			}
			f.JSONBytesPerNode += float64(len(js)) / n
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			return f, nil
		}
	}
}

// maxRunningPlugins is the most simulated plugins that run the whole time, for their
// traffic. A running plugin costs the harness its ResourceSlice controller's informer and
// copies of the node's devices, and the API server a watch: at 1,000 nodes about 2 GiB
// in the harness and 3 GiB in the API server; five times that at 5,000 nodes would not
// fit in this machine beside the rest. Each plugin's traffic is its own (the figure is
// per node), so a sample of 1,000 measures it as well as all of them.
const maxRunningPlugins = 1000

// pluginSample is every node up to maxRunningPlugins, else an even sample of each
// profile's nodes in proportion to their number, at most maxRunningPlugins in all,
// in the nodes' order.
func pluginSample(nodes []*simNode) []*simNode {
	if len(nodes) <= maxRunningPlugins {
		return nodes
	}
	var order []*kind
	groups := map[*kind][]*simNode{}
	for _, n := range nodes {
		if _, ok := groups[n.kind]; !ok {
			order = append(order, n.kind)
		}
		groups[n.kind] = append(groups[n.kind], n)
	}
	var out []*simNode
	for _, k := range order {
		g := groups[k]
		take := len(g) * maxRunningPlugins / len(nodes)
		for j := range take {
			out = append(out, g[j*len(g)/take])
		}
	}
	slices.SortFunc(out, func(a, b *simNode) int { return a.index - b.index })
	return out
}

// measureAPI leaves the running plugins (pluginSample, running since the cluster
// started) idle for idle in the default model, then flaps ports on them.
func (c *Cluster) measureAPI(ctx context.Context, idle time.Duration, flaps int) (APIFigures, error) {
	logger := klog.FromContext(ctx)
	if c.model != ModelDefault {
		if err := c.publish(ctx, ModelDefault); err != nil {
			return APIFigures{}, err
		}
	}
	var sample []*simNode
	for _, n := range c.nodes {
		if n.running {
			sample = append(sample, n)
		}
	}
	f := APIFigures{Nodes: len(c.nodes), Plugins: len(sample), IdleSeconds: idle.Seconds(), Flaps: flaps}
	// The last change of model has just been written: idle begins once no request has
	// been made for a while.
	if err := c.requests.waitQuiet(ctx, 5*time.Second, 2*time.Minute); err != nil {
		return f, err
	}
	before := c.requests.n.Load()
	select {
	case <-ctx.Done():
		return f, ctx.Err()
	case <-time.After(idle):
	}
	f.IdleRequestsPerNodePerMin = float64(c.requests.n.Load()-before) / float64(len(sample)) / idle.Minutes()
	before = c.requests.n.Load()
	for i := range flaps {
		n := sample[(i*7919)%len(sample)]
		for _, down := range []bool{true, false} {
			n.pub.disc.setDown(down)
			if err := n.pub.pub.Sync(ctx); err != nil {
				return f, fmt.Errorf("flap on %s: %w", n.name, err)
			}
			if err := c.waitTaint(ctx, n, down); err != nil {
				return f, err
			}
		}
	}
	f.RequestsPerFlap = float64(c.requests.n.Load()-before) / float64(max(flaps, 1))
	logger.Info("Measured the plugins' API traffic", "idleRequestsPerNodePerMin", f.IdleRequestsPerNodePerMin, "requestsPerFlap", f.RequestsPerFlap)
	return f, nil
}

// waitTaint waits until node n's first port's devices carry the not-active taint (down)
// or do not (up) in the API server.
func (c *Cluster) waitTaint(ctx context.Context, n *simNode, down bool) error {
	port := n.kind.inv.Ports[0]
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		list, err := c.cp.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("spec.nodeName", n.name).String(),
		})
		if err == nil {
			tainted := false
			for _, s := range list.Items {
				for _, d := range s.Spec.Devices {
					if dev, ok := n.kind.catalog[ModelDefault][d.Name]; ok && dev.Port.IBDev == port.IBDev && dev.Port.Port == port.Port && len(d.Taints) > 0 {
						tainted = true
					}
				}
			}
			if tainted == down {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("port %s/%d of %s: taint not %v in the API after a minute", port.IBDev, port.Port, n.name, down)
}
