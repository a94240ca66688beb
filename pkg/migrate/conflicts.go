package migrate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/pkg/controller"
)

// Claimant is an object that holds a name a migrated pool needs: a pool of the chart,
// an RdmaPool or a DeviceClass that exists.
type Claimant struct {
	// Kind is RdmaPool or DeviceClass.
	Kind string
	// Name is the object's name.
	Name string
	// ExtendedResourceName is the extended resource it serves; empty if none.
	ExtendedResourceName string
	// Source says where it comes from: "the chart's default values", a file name.
	Source string
	// ChartKey is the chart value that sets ExtendedResourceName, for chart pools.
	ChartKey string
	// Managed is true for a DeviceClass the controller keeps for the RdmaPool of its
	// name: it has the controller's managed-by label and a controller reference to
	// that pool, as the controller itself checks before it touches a class.
	Managed bool
}

// ChartSource is Claimant.Source of the chart's default pools.
const ChartSource = "the chart's default values"

// chartPools mirrors the pools section of deployments/helm/rdma-dra-driver/values.yaml;
// a test compares the two.
type chartPools struct {
	Pools struct {
		Shared    *chartPool  `json:"shared"`
		Exclusive *chartPool  `json:"exclusive"`
		Legacy    *chartPool  `json:"legacy"`
		Extra     []chartPool `json:"extra"`
	} `json:"pools"`
}

type chartPool struct {
	Enabled              *bool   `json:"enabled"`
	Name                 *string `json:"name"`
	ExtendedResourceName *string `json:"extendedResourceName"`
}

// ChartDefaultPools are the pools the chart installs with its default values.
func ChartDefaultPools() []Claimant {
	return []Claimant{
		{Kind: "RdmaPool", Name: "rdma-shared", Source: ChartSource, ChartKey: "pools.shared.extendedResourceName"},
		{Kind: "RdmaPool", Name: "rdma-exclusive", Source: ChartSource, ChartKey: "pools.exclusive.extendedResourceName"},
	}
}

// chartLegacyKey is the chart value that turns pools.legacy off.
const chartLegacyKey = "pools.legacy.enabled"

// chartLegacyPool is the chart's legacy pool as its defaults make it when
// pools.legacy.enabled is true; off by default, so not in ChartDefaultPools.
func chartLegacyPool() Claimant {
	return Claimant{Kind: "RdmaPool", Name: "hca-shared-devices-a", ExtendedResourceName: "rdma/hca_shared_devices_a", Source: ChartSource, ChartKey: chartLegacyKey}
}

// ChartPools returns the pools the chart installs with the values in data (a values
// file given to helm install -f), over the chart's defaults as helm merges them.
func ChartPools(data []byte, source string) ([]Claimant, error) {
	var v chartPools
	if err := yaml.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("parse chart values %s: %w", source, err)
	}
	defaults := ChartDefaultPools()
	var out []Claimant
	for i, p := range []*chartPool{v.Pools.Shared, v.Pools.Exclusive} {
		c := defaults[i]
		if p != nil {
			if p.Enabled != nil && !*p.Enabled {
				continue
			}
			if p.Name != nil {
				c.Name = *p.Name
			}
			if p.ExtendedResourceName != nil {
				c.ExtendedResourceName = *p.ExtendedResourceName
			}
		}
		c.Source = source
		out = append(out, c)
	}
	if p := v.Pools.Legacy; p != nil && p.Enabled != nil && *p.Enabled {
		c := chartLegacyPool()
		if p.Name != nil {
			c.Name = *p.Name
		}
		if p.ExtendedResourceName != nil {
			c.ExtendedResourceName = *p.ExtendedResourceName
		}
		c.Source = source
		out = append(out, c)
	}
	for i, p := range v.Pools.Extra {
		if p.Name == nil {
			continue
		}
		c := Claimant{Kind: "RdmaPool", Name: *p.Name, Source: source, ChartKey: fmt.Sprintf("pools.extra[%d].extendedResourceName", i)}
		if p.ExtendedResourceName != nil {
			c.ExtendedResourceName = *p.ExtendedResourceName
		}
		out = append(out, c)
	}
	return out, nil
}

// ExistingObjects reads DeviceClasses and RdmaPools from data: YAML documents or JSON,
// single objects or Lists, as kubectl get deviceclasses,rdmapools -o yaml prints them.
// Other kinds are ignored.
func ExistingObjects(data []byte, source string) ([]Claimant, error) {
	var out []Claimant
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var obj map[string]json.RawMessage
		if err := dec.Decode(&obj); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("parse %s: %w", source, err)
		}
		cl, err := claimants(obj, source)
		if err != nil {
			return nil, err
		}
		out = append(out, cl...)
	}
}

func claimants(obj map[string]json.RawMessage, source string) ([]Claimant, error) {
	var head struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name            string                  `json:"name"`
			Labels          map[string]string       `json:"labels"`
			OwnerReferences []metav1.OwnerReference `json:"ownerReferences"`
		} `json:"metadata"`
		Spec struct {
			ExtendedResourceName *string `json:"extendedResourceName"`
		} `json:"spec"`
		Items []map[string]json.RawMessage `json:"items"`
	}
	raw, _ := json.Marshal(obj)
	if err := json.Unmarshal(raw, &head); err != nil {
		return nil, fmt.Errorf("parse %s: not a Kubernetes object or list", source)
	}
	switch {
	case strings.HasSuffix(head.Kind, "List"):
		var out []Claimant
		for _, it := range head.Items {
			cl, err := claimants(it, source)
			if err != nil {
				return nil, err
			}
			out = append(out, cl...)
		}
		return out, nil
	case head.Kind == "RdmaPool" || head.Kind == "DeviceClass":
		c := Claimant{Kind: head.Kind, Name: head.Metadata.Name, Source: source}
		if head.Kind == "DeviceClass" && head.Metadata.Labels[controller.ManagedByLabel] == controller.ManagedByValue {
			for _, ref := range head.Metadata.OwnerReferences {
				c.Managed = c.Managed || (ref.Controller != nil && *ref.Controller && ref.Kind == v1alpha1.RdmaPoolKind &&
					ref.Name == c.Name && ref.APIVersion == v1alpha1.SchemeGroupVersion.String())
			}
		}
		if head.Spec.ExtendedResourceName != nil {
			c.ExtendedResourceName = *head.Spec.ExtendedResourceName
		}
		return []Claimant{c}, nil
	}
	return nil, nil
}

// CheckConflicts adds a problem for every migrated pool whose extended resource name or
// object name is already taken by a claimant. The controller gives an extended
// resource name to the oldest pool, so a migrated pool that shares it would not serve
// the pods that ask for it: they would keep landing on the claimant's ports.
func (r *Result) CheckConflicts(claimants []Claimant) {
	for _, p := range r.Pools {
		ern := ""
		if p.Spec.ExtendedResourceName != nil {
			ern = *p.Spec.ExtendedResourceName
		}
		for _, c := range claimants {
			// The pool's own DeviceClass (same name, same resource, kept by the
			// controller for a pool of that name) is the migration having been applied
			// before: no conflict. A class of that name and resource made by anyone else
			// keeps both: the controller does not touch a class it does not own.
			if c.Kind == "DeviceClass" && c.Name == p.Name && c.ExtendedResourceName == ern && c.Managed {
				continue
			}
			switch {
			case c.Name == p.Name && c.Kind == "RdmaPool" && c.ChartKey != "":
				r.problem("pool "+p.Name, "metadata.name", "", "the chart installs an RdmaPool of that name (%s), and helm and kubectl apply would take turns replacing it; %s", c.Source, c.advice())
			case c.Name == p.Name && c.Kind == "RdmaPool":
				r.problem("pool "+p.Name, "metadata.name", "", "an RdmaPool of that name exists (%s); kubectl apply would replace it: rename one of them", c.Source)
			case c.Name == p.Name && c.Kind == "DeviceClass" && c.ExtendedResourceName == ern:
				r.problem("pool "+p.Name, "metadata.name", "", "a DeviceClass of that name serving %s exists (%s) and the controller did not make it: "+
					"the controller would leave it alone and the pool would have no class, while pods asking for %s keep being served from that class's devices; "+
					"delete the class (kubectl delete deviceclass %s) or rename the pool", ern, c.Source, ern, c.Name)
			case c.Name == p.Name && c.Kind == "DeviceClass":
				r.problem("pool "+p.Name, "metadata.name", "", "a DeviceClass of that name exists (%s) and the pool's DeviceClass would take its name: rename the pool or delete the class", c.Source)
			case ern != "" && c.ExtendedResourceName == ern:
				r.problem("pool "+p.Name, "spec.extendedResourceName", "", "%s is already served by %s %s (%s): it keeps the name, and pods asking for %s would be served from its ports, not the migrated selection; %s",
					ern, c.Kind, c.Name, c.Source, ern, c.advice())
			}
		}
	}
}

// advice says how to free the name from c.
func (c Claimant) advice() string {
	switch {
	case c.ChartKey == chartLegacyKey:
		return fmt.Sprintf("install or upgrade the chart with --set %s=false (the migrated pools take its place) and tell migrate with --chart-values (a values file holding the same)", c.ChartKey)
	case c.ChartKey != "":
		return fmt.Sprintf("install or upgrade the chart with --set %s=\"\" and tell migrate with --chart-values (a values file holding the same)", c.ChartKey)
	case c.Kind == "RdmaPool":
		return fmt.Sprintf("remove it from that pool first (kubectl patch rdmapool %s --type=json -p '[{\"op\":\"remove\",\"path\":\"/spec/extendedResourceName\"}]')", c.Name)
	}
	return fmt.Sprintf("remove spec.extendedResourceName from DeviceClass %s or delete that class first", c.Name)
}
