package migrate

import (
	"fmt"
	"slices"
	"strings"

	"github.com/rdma-dra/rdma-dra-driver/internal/natsort"
)

// Diff is how a pool's side compares with the device plugin's on one node.
type Diff int

// The differences, from harmless to wrong. DiffWider and DiffMissing are problems (Judge);
// DiffNarrower is reported: pods get less than before, never more.
const (
	// DiffAbsent: neither side serves the resource on the node.
	DiffAbsent Diff = iota
	// DiffSame: the pool serves what the plugin did.
	DiffSame
	// DiffUnknown: the plugin's side cannot be told (a selector without equivalent).
	DiffUnknown
	// DiffNarrower: the pool serves less (fewer ports or units), and nothing more.
	DiffNarrower
	// DiffWider: the pool serves something the plugin did not.
	DiffWider
	// DiffMissing: the plugin served the resource and the pool serves nothing there.
	DiffMissing
)

// Finding is what a dry run found for one resource on one node.
type Finding struct {
	// Node is the node's name, or the sysfs root of --dry-run-against-node.
	Node string
	// Resource is the extended resource name; Pool the pool that replaces it.
	Resource, Pool string
	// PluginSide and PoolSide say what each side serves: "4" ports, "1000 units".
	PluginSide, PoolSide string
	Diff                 Diff
	// Detail says what differs: "only the pool selects mlx5_0/1".
	Detail string
}

// Verdict is the finding's last column: the detail of a finding that is no difference
// ("same ports"), else the difference in capitals where it is a problem ("WIDER: ...").
func (f Finding) Verdict() string {
	word := map[Diff]string{DiffAbsent: "not here", DiffSame: "same", DiffUnknown: "unknown", DiffNarrower: "narrower", DiffWider: "WIDER", DiffMissing: "MISSING"}[f.Diff]
	switch {
	case f.Detail == "":
		return word
	case f.Diff == DiffAbsent || f.Diff == DiffSame || f.Diff == DiffUnknown:
		return f.Detail
	}
	return word + ": " + f.Detail
}

// NodeFindings compares, per entry, the ports the plugin selected on the previewed node
// with those the pool selects, from Preview's rows. node names the node in the findings.
// An entry that selects no port there is DiffMissing too: the dry run proves nothing
// about it.
func NodeFindings(res *Result, rows []PreviewRow, node string) []Finding {
	var out []Finding
	for i, e := range res.Entries {
		var old, new, unknown int
		var wider, narrower []string
		for _, r := range rows {
			name := portKey(r.Port)
			switch {
			case r.Old[i] == Unknown:
				unknown++
			case r.Old[i] == Yes && !r.New[i]:
				narrower = append(narrower, name)
			case r.Old[i] == No && r.New[i]:
				wider = append(wider, name)
			}
			if r.Old[i] == Yes {
				old++
			}
			if r.New[i] {
				new++
			}
		}
		f := Finding{Node: node, Resource: e.Resource, Pool: e.Pool, PluginSide: fmt.Sprint(old), PoolSide: fmt.Sprint(new)}
		switch {
		case len(wider) > 0:
			f.Diff, f.Detail = DiffWider, "only the pool selects "+strings.Join(wider, ", ")
		case unknown > 0:
			f.Diff, f.Detail = DiffUnknown, fmt.Sprintf("%d port(s) unknown: the entry uses selectors without equivalent", unknown)
		case old > 0 && new == 0:
			f.Diff, f.Detail = DiffMissing, "the pool selects no port of this node, the device plugin selected "+strings.Join(narrower, ", ")
		case len(narrower) > 0:
			f.Diff, f.Detail = DiffNarrower, "only the device plugin selected "+strings.Join(narrower, ", ")
		case old == 0:
			// Proof on a node is proof only where the entry selects something; a typo in
			// its selectors would look the same as a node of another kind.
			f.Diff, f.Detail = DiffMissing, "neither the device plugin nor the pool selects a port of this node: run the dry run on a node the entry is for (a typo in its selectors looks the same)"
		default:
			f.Diff, f.Detail = DiffSame, "same ports"
		}
		out = append(out, f)
	}
	return out
}

// Judge turns the findings of a dry run into problems: a DiffWider finding unless its
// resource is in opts.AllowWider (then a note starting "WIDER"), and a DiffMissing one.
// DiffNarrower and DiffAbsent findings are in the output already and stay there.
func (r *Result) Judge(findings []Finding, opts Options) {
	for _, f := range findings {
		where := fmt.Sprintf("%s (pool %s) on %s", f.Resource, f.Pool, f.Node)
		switch f.Diff {
		case DiffWider:
			if slices.Contains(opts.AllowWider, f.Resource) {
				if !slices.Contains(r.Accepted, f.Resource) {
					r.Accepted = append(r.Accepted, f.Resource)
				}
				r.note("WIDER %s: %s; accepted by %s %s", where, f.Detail, FlagAllowWider, f.Resource)
				continue
			}
			r.Problems = append(r.Problems, Problem{Entry: where, Message: "the pool serves more than the device plugin did: " + f.Detail,
				WideningKey: f.Resource, Flag: FlagAllowWider})
		case DiffMissing:
			r.problem(where, "", "", "%s; pods asking for %s would no longer run there", f.Detail, f.Resource)
		}
	}
}

// sortFindings orders findings by node, then resource, in natural order.
func sortFindings(fs []Finding) {
	slices.SortStableFunc(fs, func(a, b Finding) int {
		if c := natsort.Compare(a.Node, b.Node); c != 0 {
			return c
		}
		return natsort.Compare(a.Resource, b.Resource)
	})
}
