package nodeconfig

import (
	"os"
	"strings"
	"testing"
)

// TestDocExample parses the example of docs/device-model.md, so that the documented
// format cannot drift from the decoder.
func TestDocExample(t *testing.T) {
	data, err := os.ReadFile("../../docs/device-model.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "<!-- node config example -->\n```yaml\n")
	if !ok {
		t.Fatal("docs/device-model.md lacks the marked node config example")
	}
	example, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("unterminated example")
	}
	c, err := Parse([]byte(example))
	if err != nil {
		t.Fatalf("the documented example does not parse: %v", err)
	}
	if c.Shares != 32 || c.Legacy.Shares != 8 || len(c.Include) != 1 || len(c.Exclude) != 1 {
		t.Errorf("example parsed as %+v", c)
	}
}
