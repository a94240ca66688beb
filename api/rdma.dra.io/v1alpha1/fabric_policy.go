package v1alpha1

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// FabricPolicy is an admin limit (RdmaConfig.AllowedFabric): which fabric settings a
// claim of the class may set, and to what. Only a DeviceClass config (an RdmaPool's
// config among them) may set it. Like NetworkPolicy, it checks only the fields a claim
// sets: the class's own fabric section is the admin's and is taken as written.
//
// The settings act on the whole fabric (a traffic class or service level can take a
// share of the switches' buffers from other tenants, a partition key opens a
// partition), so each is off unless a field here grants it: without AllowedFabric a
// claim may set no fabric field but topologyFile.
type FabricPolicy struct {
	// TrafficClasses a claim may set in fabric.trafficClass.
	TrafficClasses []int32 `json:"trafficClasses,omitempty"`
	// ServiceLevels a claim may set in fabric.serviceLevel.
	ServiceLevels []int32 `json:"serviceLevels,omitempty"`
	// PKeys a claim may set in fabric.pkey (0x8001, ...). A listed full-member key also
	// grants its limited form (0x0001 for 0x8001), which can do less.
	PKeys []string `json:"pkeys,omitempty"`
	// AddressFamilies a claim may set in fabric.addressFamily.
	AddressFamilies []AddressFamily `json:"addressFamilies,omitempty"`
	// RoCEVersions a claim may set in fabric.roceVersion.
	RoCEVersions []int32 `json:"roceVersions,omitempty"`
	// AdaptiveRouting, when true, lets a claim set fabric.adaptiveRouting (either way).
	AdaptiveRouting *bool `json:"adaptiveRouting,omitempty"`
	// MaxQPsPerConnection lets a claim set fabric.qpsPerConnection up to this value.
	MaxQPsPerConnection *int32 `json:"maxQPsPerConnection,omitempty"`
}

// validate checks the policy's values; list lengths first, so that nothing of an
// oversized list is parsed.
func (p *FabricPolicy) validate(fldPath *field.Path) field.ErrorList {
	errs := boundLists(fldPath,
		listLen{"trafficClasses", len(p.TrafficClasses)}, listLen{"serviceLevels", len(p.ServiceLevels)}, listLen{"pkeys", len(p.PKeys)},
		listLen{"addressFamilies", len(p.AddressFamilies)}, listLen{"roceVersions", len(p.RoCEVersions)},
	)
	if len(errs) > 0 {
		return errs
	}
	for i := range p.TrafficClasses {
		errs = append(errs, validateRange(fldPath.Child("trafficClasses").Index(i), &p.TrafficClasses[i], 0, MaxTrafficClass)...)
	}
	for i := range p.ServiceLevels {
		errs = append(errs, validateRange(fldPath.Child("serviceLevels").Index(i), &p.ServiceLevels[i], 0, MaxServiceLevel)...)
	}
	for i, s := range p.PKeys {
		if _, err := ParsePKey(s); err != nil {
			errs = append(errs, field.Invalid(fldPath.Child("pkeys").Index(i), truncate(s), err.Error()))
		}
	}
	for i, a := range p.AddressFamilies {
		errs = append(errs, validateAddressFamily(fldPath.Child("addressFamilies").Index(i), a)...)
	}
	for i, v := range p.RoCEVersions {
		if !isRoCEVersion(v) {
			errs = append(errs, field.Invalid(fldPath.Child("roceVersions").Index(i), v, "must be 1 or 2"))
		}
	}
	errs = append(errs, validateRange(fldPath.Child("maxQPsPerConnection"), p.MaxQPsPerConnection, 1, MaxQPsPerConnection)...)
	return errs
}

// fabricPolicyOf returns the fabric policy of a class's configs (merged in order like
// Merge); never nil: an empty policy grants nothing.
func fabricPolicyOf(class []*RdmaConfig) *FabricPolicy {
	if p := mergedLimits(class).AllowedFabric; p != nil {
		return p
	}
	return &FabricPolicy{}
}

// exceededFabric reports the fabric fields set in claim (only what the claims set, not
// merged with the class) that the policy does not allow, at fldPath (the fabric
// section). Invalid values are left to Validate.
func (p *FabricPolicy) exceededFabric(fldPath *field.Path, claim *FabricConfig) field.ErrorList {
	if claim == nil {
		return nil
	}
	var errs field.ErrorList
	forbid := func(child, msg string) {
		errs = append(errs, field.Forbidden(fldPath.Child(child), msg))
	}
	// notListed checks a value against one of the policy's lists.
	notListed := func(child, list string, set bool, value string, allowed []string, ok bool) {
		switch {
		case !set || ok:
		case len(allowed) == 0:
			forbid(child, fmt.Sprintf("is not allowed: the DeviceClass's allowedFabric.%s is empty", list))
		default:
			forbid(child, fmt.Sprintf("%s is not one of the DeviceClass's allowedFabric.%s [%s]", value, list, strings.Join(allowed, ", ")))
		}
	}
	if v := claim.TrafficClass; v != nil {
		notListed("trafficClass", "trafficClasses", true, fmt.Sprint(*v), formatInts(p.TrafficClasses), slices.Contains(p.TrafficClasses, *v))
	}
	if v := claim.ServiceLevel; v != nil {
		notListed("serviceLevel", "serviceLevels", true, fmt.Sprint(*v), formatInts(p.ServiceLevels), slices.Contains(p.ServiceLevels, *v))
	}
	if v := claim.PKey; v != nil {
		want, err := ParsePKey(*v)
		notListed("pkey", "pkeys", err == nil, strconv.Quote(*v), quoteAll(p.PKeys), err == nil && p.grantsPKey(want))
	}
	if v := claim.AddressFamily; v != nil {
		notListed("addressFamily", "addressFamilies", isOneOf(*v, addressFamilies), strconv.Quote(string(*v)), quoteAll(p.AddressFamilies), slices.Contains(p.AddressFamilies, *v))
	}
	if v := claim.RoCEVersion; v != nil {
		notListed("roceVersion", "roceVersions", true, fmt.Sprint(*v), formatInts(p.RoCEVersions), slices.Contains(p.RoCEVersions, *v))
	}
	if claim.AdaptiveRouting != nil && (p.AdaptiveRouting == nil || !*p.AdaptiveRouting) {
		forbid("adaptiveRouting", "is not allowed: the DeviceClass's allowedFabric.adaptiveRouting is not true")
	}
	if v := claim.QPsPerConnection; v != nil {
		switch {
		case p.MaxQPsPerConnection == nil:
			forbid("qpsPerConnection", "is not allowed: the DeviceClass's allowedFabric.maxQPsPerConnection is unset")
		case *v > *p.MaxQPsPerConnection:
			forbid("qpsPerConnection", fmt.Sprintf("%d exceeds the DeviceClass's allowedFabric.maxQPsPerConnection %d", *v, *p.MaxQPsPerConnection))
		}
	}
	return errs
}

// grantsPKey reports whether a listed key grants want: the same key, or want is the
// limited form of a listed full-member key.
func (p *FabricPolicy) grantsPKey(want uint16) bool {
	const full = 0x8000
	return slices.ContainsFunc(p.PKeys, func(s string) bool {
		v, err := ParsePKey(s)
		return err == nil && (v == want || (v&full != 0 && want == v&^full))
	})
}

func formatInts(vs []int32) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = strconv.Itoa(int(v))
	}
	return out
}

func quoteAll[T ~string](vs []T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = strconv.Quote(string(v))
	}
	return out
}
