package nodeconfig

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
)

// docExample returns the YAML block of docs/device-model.md that follows the comment
// <!-- marker -->.
func docExample(t *testing.T, marker string) []byte {
	t.Helper()
	data, err := os.ReadFile("../../docs/device-model.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "<!-- "+marker+" -->\n```yaml\n")
	if !ok {
		t.Fatalf("docs/device-model.md lacks the example marked %q", marker)
	}
	example, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatalf("example %q is not terminated", marker)
	}
	return []byte(example)
}

// TestDocExample parses the example of docs/device-model.md, so that the documented
// format cannot drift from the decoder.
func TestDocExample(t *testing.T) {
	c, err := Parse(docExample(t, "node config example"))
	if err != nil {
		t.Fatalf("the documented example does not parse: %v", err)
	}
	if c.Shares != 32 || c.Legacy.Shares != 8 || len(c.Include) != 1 || len(c.Exclude) != 1 {
		t.Errorf("example parsed as %+v", c)
	}
}

// TestDocRailsExample parses the node pool example of the rails section, and checks that
// the port its comment speaks of lands on its rail.
func TestDocRailsExample(t *testing.T) {
	c, err := Parse(docExample(t, "node config rails example"))
	if err != nil {
		t.Fatalf("the documented example does not parse: %v", err)
	}
	for i, r := range c.Rails {
		if r.Rail == nil || *r.Rail != i {
			t.Errorf("rails[%d] is rail %v, want the rails in order", i, r.Rail)
		}
	}
	other := discovery.Port{IBDev: "mlx5_6", Port: 1, PCIBusID: "0000:be:00.0"}
	if rail, ok, err := c.RailOf(&other); err != nil || !ok || rail != 6 {
		t.Errorf("the other server model's adapter is on rail %d (%v, %v), want 6", rail, ok, err)
	}
}

// TestDocLinkTypes checks that the docs that list the spellings of a link type (the node
// configuration's selector table, the RdmaPool example) list exactly v1alpha1.LinkTypes,
// which both the node configuration and RdmaPools accept.
func TestDocLinkTypes(t *testing.T) {
	var want []string
	for _, lt := range v1alpha1.LinkTypes {
		want = append(want, string(lt))
	}
	slices.Sort(want)
	for _, tc := range []struct {
		file, linePrefix string
		list             *regexp.Regexp // its first group is the part of the line with the spellings
		spelling         *regexp.Regexp // its last group is one spelling
	}{
		{file: "device-model.md", linePrefix: "| `linkTypes` | link layer | ",
			list: regexp.MustCompile(`^([^.]*)\.`), spelling: regexp.MustCompile("`([^`]+)`")},
		{file: "controller.md", linePrefix: "    linkTypes: ",
			list: regexp.MustCompile(`# (.*)$`), spelling: regexp.MustCompile(`[A-Za-z]+`)},
	} {
		t.Run(tc.file, func(t *testing.T) {
			data, err := os.ReadFile("../../docs/" + tc.file)
			if err != nil {
				t.Fatal(err)
			}
			var m []string
			for l := range strings.Lines(string(data)) {
				if rest, ok := strings.CutPrefix(l, tc.linePrefix); ok {
					m = tc.list.FindStringSubmatch(strings.TrimSuffix(rest, "\n"))
					break
				}
			}
			if m == nil {
				t.Fatalf("docs/%s lacks the line %q... that lists the link types", tc.file, tc.linePrefix)
			}
			var got []string
			for _, s := range tc.spelling.FindAllStringSubmatch(m[1], -1) {
				got = append(got, s[len(s)-1])
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("docs/%s lists the link types %v, v1alpha1.LinkTypes are %v", tc.file, got, want)
			}
		})
	}
}
