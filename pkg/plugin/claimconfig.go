package plugin

import (
	"errors"
	"fmt"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/dynamic-resource-allocation/resourceclaim"

	"github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
)

// decodedConfig is one opaque config of this driver from the claim's allocation.
type decodedConfig struct {
	index  int
	source resourceapi.AllocationConfigSource
	item   resourceapi.DeviceAllocationConfiguration
	cfg    *v1alpha1.RdmaConfig
	err    error
}

// claimConfigs are the claim's opaque configs of this driver, each decoded and validated
// once however many requests it applies to.
type claimConfigs []decodedConfig

// decodeConfigs decodes the configs of driver in the allocation, strictly, and validates
// them with the field path they have in the claim's status, so that an error names
// exactly the value to fix.
func decodeConfigs(driver string, configs []resourceapi.DeviceAllocationConfiguration) claimConfigs {
	var out claimConfigs
	for i, c := range configs {
		if c.Opaque == nil || c.Opaque.Driver != driver {
			continue
		}
		path := field.NewPath("status", "allocation", "devices", "config").Index(i).Child("opaque", "parameters")
		dc := decodedConfig{index: i, source: c.Source, item: c}
		cfg, err := v1alpha1.DecodeConfig(c.Opaque.Parameters.Raw)
		switch {
		case err != nil:
			dc.err = fmt.Errorf("%s: %w", path, err)
		default:
			// A claim's config may not set the class's admin limits.
			source := v1alpha1.SourceClaim
			if c.Source == resourceapi.AllocationConfigSourceClass {
				source = v1alpha1.SourceClass
			}
			if errs := cfg.ValidateFor(path, source); len(errs) > 0 {
				dc.err = errs.ToAggregate()
			} else {
				dc.cfg = cfg
			}
		}
		out = append(out, dc)
	}
	return out
}

// forResult merges the configs that apply to one allocated device: class configs first,
// claim configs over them, each group in the order of the allocation, with the defaults
// of a shared or an exclusive device and the class's admin limits enforced
// (v1alpha1.Resolve). A broken config is reported once per claim (reported tracks
// which), naming the first request it applies to.
func (cs claimConfigs) forResult(r resourceapi.DeviceRequestAllocationResult, shared bool, reported map[int]bool) (*v1alpha1.RdmaConfig, []error) {
	var class, claim []*v1alpha1.RdmaConfig
	var errs []error
	for _, dc := range cs {
		if len(resourceclaim.ConfigForResult([]resourceapi.DeviceAllocationConfiguration{dc.item}, r)) == 0 {
			continue
		}
		if dc.err != nil {
			if !reported[dc.index] {
				reported[dc.index] = true
				errs = append(errs, fmt.Errorf("request %q: invalid %s config: %w", r.Request, sourceName(dc.source), dc.err))
			} else {
				// Still a failure for this device, but the message is already there.
				errs = append(errs, errAlreadyReported)
			}
			continue
		}
		if dc.source == resourceapi.AllocationConfigSourceClass {
			class = append(class, dc.cfg)
		} else {
			claim = append(claim, dc.cfg)
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	cfg, err := v1alpha1.Resolve(shared, class, claim)
	if err != nil {
		return nil, []error{fmt.Errorf("request %q, device %q: %w", r.Request, r.Device, err)}
	}
	return cfg, nil
}

func sourceName(s resourceapi.AllocationConfigSource) string {
	if s == resourceapi.AllocationConfigSourceClass {
		return "DeviceClass"
	}
	return "claim"
}

// errAlreadyReported marks a device that failed because of a config whose error is
// already in the claim's message.
var errAlreadyReported = errors.New("already reported")

// joinErrors joins a claim's errors into one line for the pod's events, leaving out
// repeats.
func joinErrors(errs []error) error {
	var msgs []string
	var kept []error
	for _, err := range errs {
		if errors.Is(err, errAlreadyReported) {
			continue
		}
		msgs = append(msgs, err.Error())
		kept = append(kept, err)
	}
	if len(kept) == 0 {
		return errors.New("invalid configuration")
	}
	return &claimError{msg: strings.Join(msgs, "; "), errs: kept}
}

// claimError is the error of one claim; Unwrap keeps the causes reachable.
type claimError struct {
	msg  string
	errs []error
}

func (e *claimError) Error() string   { return e.msg }
func (e *claimError) Unwrap() []error { return e.errs }
