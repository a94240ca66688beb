package cdi

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/sysfs"
)

// Environment variables of the fabric settings (RdmaConfig.fabric). Their names and
// meanings are NCCL's (src/transport/net_ib, src/graph/topo.cc) and UCX's
// (src/uct/ib/base/ib_iface.c, src/uct/ib/mlx5/ib_mlx5.c); docs/claim-config.md cites
// them.
const (
	EnvNCCLTrafficClass    = "NCCL_IB_TC"
	EnvUCXTrafficClass     = "UCX_IB_TRAFFIC_CLASS"
	EnvNCCLServiceLevel    = "NCCL_IB_SL"
	EnvUCXServiceLevel     = "UCX_IB_SL"
	EnvNCCLAdaptiveRouting = "NCCL_IB_ADAPTIVE_ROUTING"
	EnvUCXAdaptiveRouting  = "UCX_IB_AR_ENABLE"
	EnvNCCLQPsPerConn      = "NCCL_IB_QPS_PER_CONNECTION"
	EnvNCCLPKey            = "NCCL_IB_PKEY"
	EnvUCXPKey             = "UCX_IB_PKEY"
	EnvNCCLRoCEVersion     = "NCCL_IB_ROCE_VERSION_NUM"
	EnvNCCLAddrFamily      = "NCCL_IB_ADDR_FAMILY"
	// EnvUCXGIDIndex is set beside NCCL_IB_GID_INDEX where the index follows the
	// claim's roceVersion or addressFamily: UCX has no variable for either.
	EnvUCXGIDIndex = "UCX_IB_GID_INDEX"
	// EnvNCCLTopoFile is the path of the claim's NCCL topology file, asked for by
	// fabric.topologyFile; the topology file writer sets it, not envFor.
	EnvNCCLTopoFile = "NCCL_TOPO_FILE"
)

// PortTables reads the live tables of a port that fabric settings are looked up in at
// prepare. *porttable.Reader implements it over a sysfs root.
type PortTables interface {
	// PKeyTable returns the used entries of the port's P_Key table.
	PKeyTable(ibdev string, port int) (sysfs.PKeyTable, error)
	// GIDIndex returns the index of the port's lowest routable GID entry of RoCE
	// version roceVersion (1 or 2) and address family family.
	GIDIndex(ibdev string, port int, roceVersion int, family v1alpha1.AddressFamily) (int, error)
}

// linkLayers says which ports a fabric setting acts on.
type linkLayers int

const (
	onInfiniBand linkLayers = 1 << iota
	onRoCE
	onBoth = onInfiniBand | onRoCE
)

// covers reports whether a setting for these link layers acts on port p.
func (l linkLayers) covers(p *discovery.Port) bool {
	switch p.LinkLayer {
	case discovery.LinkLayerInfiniBand:
		return l&onInfiniBand != 0
	case discovery.LinkLayerEthernet:
		return l&onRoCE != 0
	}
	return false
}

// ports names the ports a setting acts on, for messages: "" when it acts on all.
func (l linkLayers) ports() string {
	if l == onBoth {
		return ""
	}
	return " and " + l.String() + " ports"
}

func (l linkLayers) String() string {
	switch l {
	case onInfiniBand:
		return "InfiniBand"
	case onRoCE:
		return "RoCE"
	}
	return "both"
}

// fabricSetting is one field of RdmaConfig.fabric and the variables it becomes: the
// single list that envFor, the docs' table (TestDocFabricTable) and the tests read.
type fabricSetting struct {
	// field is the field's name below fabric.
	field string
	// becomes says which variables the setting becomes, with what value (docs).
	becomes string
	// on is the link layers the setting acts on; it is emitted only when a port of
	// those takes part.
	on linkLayers
	// unset says what NCCL and UCX do when the setting is not set (docs).
	unset string
	// grant is the allowedFabric field that lets a claim set it (docs).
	grant string
	// value returns the setting's value in f as text, and false when it is not set.
	value func(f *v1alpha1.FabricConfig) (string, bool)
	// env returns the variables for an agreed value; ports are the taking-part ports
	// the setting acts on.
	env func(value string, ports []*discovery.Port, tables PortTables) ([]string, error)
}

// fabricSettings are the settings in the order their variables are emitted.
var fabricSettings = []fabricSetting{
	{
		field: "trafficClass", becomes: "`NCCL_IB_TC`, `UCX_IB_TRAFFIC_CLASS`", on: onBoth, grant: "trafficClasses",
		unset: "NCCL 0; UCX the port's RoCE v2 default traffic class, else 106 (0 on InfiniBand)",
		value: intValue(func(f *v1alpha1.FabricConfig) *int32 { return f.TrafficClass }),
		env:   same(EnvNCCLTrafficClass, EnvUCXTrafficClass),
	},
	{
		field: "serviceLevel", becomes: "`NCCL_IB_SL`, `UCX_IB_SL`", on: onBoth, grant: "serviceLevels",
		unset: "NCCL 0; UCX an SL that matches `UCX_IB_AR_ENABLE`, else 0",
		value: intValue(func(f *v1alpha1.FabricConfig) *int32 { return f.ServiceLevel }),
		env:   same(EnvNCCLServiceLevel, EnvUCXServiceLevel),
	},
	{
		field: "adaptiveRouting", becomes: "`NCCL_IB_ADAPTIVE_ROUTING` `1`/`0`, `UCX_IB_AR_ENABLE` `y`/`n`", on: onBoth, grant: "adaptiveRouting: true",
		unset: "NCCL on for InfiniBand, off for RoCE; UCX `auto`",
		value: func(f *v1alpha1.FabricConfig) (string, bool) {
			if f.AdaptiveRouting == nil {
				return "", false
			}
			return strconv.FormatBool(*f.AdaptiveRouting), true
		},
		env: func(v string, _ []*discovery.Port, _ PortTables) ([]string, error) {
			nccl, ucx := "0", "n"
			if v == "true" {
				nccl, ucx = "1", "y"
			}
			return []string{EnvNCCLAdaptiveRouting + "=" + nccl, EnvUCXAdaptiveRouting + "=" + ucx}, nil
		},
	},
	{
		field: "qpsPerConnection", becomes: "`NCCL_IB_QPS_PER_CONNECTION`; UCX has no equivalent", on: onBoth, grant: "maxQPsPerConnection",
		unset: "NCCL 1",
		value: intValue(func(f *v1alpha1.FabricConfig) *int32 { return f.QPsPerConnection }),
		env:   same(EnvNCCLQPsPerConn),
	},
	{
		field: "pkey", becomes: "`NCCL_IB_PKEY` = the key's index in the ports' P_Key table, `UCX_IB_PKEY` = its partition (`0x0001` for `0x8001`)", on: onInfiniBand, grant: "pkeys",
		unset: "NCCL index 0; UCX the first full-member entry",
		value: func(f *v1alpha1.FabricConfig) (string, bool) {
			if f.PKey == nil {
				return "", false
			}
			v, _ := v1alpha1.ParsePKey(*f.PKey) // validated by BuildSpec
			return fmt.Sprintf("0x%04x", v), true
		},
		env: pkeyEnv,
	},
	{
		field: "roceVersion", becomes: "`NCCL_IB_ROCE_VERSION_NUM`; with `gidIndex: auto`, `NCCL_IB_GID_INDEX` and `UCX_IB_GID_INDEX` follow", on: onRoCE, grant: "roceVersions",
		unset: "NCCL 2",
		value: intValue(func(f *v1alpha1.FabricConfig) *int32 { return f.RoCEVersion }),
		env:   same(EnvNCCLRoCEVersion),
	},
	{
		field: "addressFamily", becomes: "`NCCL_IB_ADDR_FAMILY` `AF_INET`/`AF_INET6`; with `gidIndex: auto`, `NCCL_IB_GID_INDEX` and `UCX_IB_GID_INDEX` follow", on: onRoCE, grant: "addressFamilies",
		unset: "NCCL `AF_INET`",
		value: func(f *v1alpha1.FabricConfig) (string, bool) {
			if f.AddressFamily == nil {
				return "", false
			}
			return string(*f.AddressFamily), true
		},
		env: func(v string, _ []*discovery.Port, _ PortTables) ([]string, error) {
			af := "AF_INET"
			if v == string(v1alpha1.AddressFamilyIPv6) {
				af = "AF_INET6"
			}
			return []string{EnvNCCLAddrFamily + "=" + af}, nil
		},
	},
}

func intValue(get func(*v1alpha1.FabricConfig) *int32) func(*v1alpha1.FabricConfig) (string, bool) {
	return func(f *v1alpha1.FabricConfig) (string, bool) {
		if v := get(f); v != nil {
			return strconv.Itoa(int(*v)), true
		}
		return "", false
	}
}

// same sets each of vars to the value as it is.
func same(vars ...string) func(string, []*discovery.Port, PortTables) ([]string, error) {
	return func(v string, _ []*discovery.Port, _ PortTables) ([]string, error) {
		out := make([]string, len(vars))
		for i, name := range vars {
			out[i] = name + "=" + v
		}
		return out, nil
	}
}

// pkeyEnv looks the P_Key up in the table of every InfiniBand port: NCCL takes the
// index (one per process, so every port must hold the key at the same index), UCX the
// 15-bit partition (it refuses values above 0x7fff and finds the entry itself,
// preferring a full member).
func pkeyEnv(v string, ports []*discovery.Port, tables PortTables) ([]string, error) {
	key64, _ := strconv.ParseUint(strings.TrimPrefix(v, "0x"), 16, 16)
	key := uint16(key64)
	first, firstPort, firstTable := -1, "", sysfs.PKeyTable(nil)
	for _, p := range ports {
		name := portName(p)
		table, err := tables.PKeyTable(p.IBDev, p.Port)
		if err != nil {
			return nil, fmt.Errorf("fabric.pkey %s: %w", v, err)
		}
		i, ok := table.Index(key)
		if !ok {
			return nil, fmt.Errorf("fabric.pkey %s: port %s does not hold it (P_Key table %s)", v, name, table)
		}
		if first >= 0 && i != first {
			return nil, fmt.Errorf("fabric.pkey %s: port %s holds it at index %d (P_Key table %s), port %s at index %d (P_Key table %s); NCCL_IB_PKEY is one index for every port",
				v, firstPort, first, firstTable, name, i, table)
		}
		first, firstPort, firstTable = i, name, table
	}
	if first < 0 {
		return nil, nil
	}
	return []string{EnvNCCLPKey + "=" + strconv.Itoa(first), fmt.Sprintf("%s=0x%04x", EnvUCXPKey, key&^sysfs.PKeyFull)}, nil
}

func portName(p *discovery.Port) string { return p.IBDev + "/" + strconv.Itoa(p.Port) }

// envPort is a port that takes part in the claim's environment, with its request.
type envPort struct {
	port    *discovery.Port
	request string
	cfg     *v1alpha1.RdmaConfig
}

// fabricEnv returns the variables of the fabric settings of the taking-part ports. A
// setting's variables are set once per claim, so every request it acts on (one with a
// port of the setting's link layers) must resolve the same value, set or not; a
// disagreement is an error that names the requests and their values. A request whose
// ports the setting does not act on (a pkey on RoCE) is left out of the comparison.
func fabricEnv(ctx context.Context, ports []envPort, tables PortTables) ([]string, error) {
	var env []string
	for _, s := range fabricSettings {
		type seen struct{ request, value string }
		var values []seen
		var acted []*discovery.Port
		for _, ep := range ports {
			if !s.on.covers(ep.port) {
				continue
			}
			acted = append(acted, ep.port)
			v, set := "", false
			if ep.cfg.Fabric != nil {
				v, set = s.value(ep.cfg.Fabric)
			}
			if !set {
				v = "unset"
			}
			if !slices.Contains(values, seen{ep.request, v}) {
				values = append(values, seen{ep.request, v})
			}
		}
		if len(values) == 0 || (len(values) == 1 && values[0].value == "unset") {
			continue
		}
		for _, o := range values[1:] {
			if o.value != values[0].value {
				var parts []string
				for _, x := range values {
					parts = append(parts, fmt.Sprintf("request %q: %s", x.request, x.value))
				}
				return nil, fmt.Errorf("the requests of the claim disagree on fabric.%s (%s); the claim's containers share one environment, so every request with ncclEnv on%s must set the same value",
					s.field, strings.Join(parts, ", "), s.on.ports())
			}
		}
		if values[0].value == "unset" {
			continue
		}
		vars, err := s.env(values[0].value, acted, tables)
		if err != nil {
			return nil, err
		}
		env = append(env, vars...)
	}
	logFabricLeftOut(ctx, ports)
	return env, nil
}

// logFabricLeftOut notes settings that a request sets but that act on none of its
// ports (a pkey on a RoCE-only request): not an error, since a class's config may hold
// settings for both link layers, but worth a line when a user wonders.
func logFabricLeftOut(ctx context.Context, ports []envPort) {
	for _, s := range fabricSettings {
		for _, ep := range ports {
			if ep.cfg.Fabric == nil || s.on.covers(ep.port) {
				continue
			}
			if _, set := s.value(ep.cfg.Fabric); set && !slices.ContainsFunc(ports, func(o envPort) bool { return o.request == ep.request && s.on.covers(o.port) }) {
				logger(ctx).V(2).Info("Fabric setting acts on no port of its request", "setting", "fabric."+s.field, "request", ep.request, "actsOn", s.on.String())
				break
			}
		}
	}
}
