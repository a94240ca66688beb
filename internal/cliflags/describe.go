package cliflags

import (
	"flag"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"
)

// FlagInfo describes one flag of a binary: what its documentation, the chart's
// environment and tests compare against.
type FlagInfo struct {
	// Name is the flag's name, Aliases its other names.
	Name    string   `json:"name"`
	Aliases []string `json:"aliases,omitempty"`
	// EnvVars are its environment twins; the first is the one to set.
	EnvVars []string `json:"env"`
	// Default is the default as --help shows it; empty when there is none.
	Default string `json:"default,omitempty"`
	Usage   string `json:"usage"`
	// Category groups flags in --help ("Logging:").
	Category string `json:"category,omitempty"`
}

// Describe lists flags as FlagInfo, in their order.
func Describe(flags []cli.Flag) []FlagInfo {
	out := make([]FlagInfo, 0, len(flags))
	for _, f := range flags {
		names := f.Names()
		info := FlagInfo{Name: names[0], Aliases: names[1:]}
		if d, ok := f.(cli.DocGenerationFlag); ok {
			info.EnvVars = d.GetEnvVars()
			info.Usage = d.GetUsage()
			info.Default = d.GetDefaultText()
		}
		switch f := f.(type) {
		case *cli.BoolFlag:
			if f.DefaultText == "" {
				// A bool flag takes no value, but has a default all the same.
				info.Default = strconv.FormatBool(f.Value)
			}
		case *cli.StringFlag:
			if f.DefaultText == "" {
				info.Default = f.Value // GetDefaultText quotes it
			}
		}
		if c, ok := f.(cli.CategorizableFlag); ok {
			info.Category = c.GetCategory()
		}
		out = append(out, info)
	}
	return out
}

// KeysAndValues lists every flag under its name in camel case (--kube-api-qps:
// kubeAPIQPS) with the value it is bound to, for a startup log line. A flag without a
// destination has none to show: it is listed with its default.
func KeysAndValues(flags []cli.Flag) []any {
	var kv []any
	for _, f := range flags {
		kv = append(kv, LogKey(f.Names()[0]), boundValue(f))
	}
	return kv
}

func boundValue(f cli.Flag) any {
	switch f := f.(type) {
	case *cli.StringFlag:
		if f.Destination != nil {
			return *f.Destination
		}
		return f.Value
	case *cli.IntFlag:
		if f.Destination != nil {
			return *f.Destination
		}
		return f.Value
	case *cli.Float64Flag:
		if f.Destination != nil {
			return *f.Destination
		}
		return f.Value
	case *cli.BoolFlag:
		if f.Destination != nil {
			return *f.Destination
		}
		return f.Value
	case *cli.DurationFlag:
		if f.Destination != nil {
			return *f.Destination
		}
		return f.Value
	case *cli.GenericFlag:
		v := f.Value
		if f.Destination != nil {
			v = f.Destination
		}
		if g, ok := v.(flag.Getter); ok {
			return g.Get()
		}
		if v != nil {
			return v.String()
		}
	}
	if d, ok := f.(cli.DocGenerationFlag); ok {
		return d.GetValue()
	}
	return nil
}

// initialisms are written in capitals inside a log key, as Go names write them.
var initialisms = map[string]string{
	"api": "API", "cdi": "CDI", "id": "ID", "ips": "IPs", "nri": "NRI", "qps": "QPS",
	"rdma": "RDMA", "tls": "TLS", "uid": "UID", "url": "URL",
}

// LogKey is the log key of a flag: its words in camel case, the first in lower case.
func LogKey(flagName string) string {
	words := strings.Split(flagName, "-")
	for i, w := range words {
		if i == 0 {
			continue
		}
		if up, ok := initialisms[w]; ok {
			words[i] = up
		} else if w != "" {
			words[i] = strings.ToUpper(w[:1]) + w[1:]
		}
	}
	return strings.Join(words, "")
}
