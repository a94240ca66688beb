package deployments

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/cel/environment"
)

// policyEvaluator evaluates a ValidatingAdmissionPolicy's CEL in the API server's own CEL
// environment (the base environment of k8s.io/apiserver, with its libraries and optional
// types) on untyped request and object values. It stops short of the admission plugin,
// whose packages would pull tracing and network proxies into the module for one test;
// what it leaves out is the schema type check, which the API server does on create.
type policyEvaluator struct {
	matches, variables, validations, messages []cel.Program
	names                                     []string // variable names
	validationMessages                        []string
}

func compilePolicy(t *testing.T, p *admissionregistrationv1.ValidatingAdmissionPolicy) *policyEvaluator {
	t.Helper()
	base, err := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()).Env(environment.StoredExpressions)
	if err != nil {
		t.Fatal(err)
	}
	env, err := base.Extend(
		cel.Variable("request", cel.DynType),
		cel.Variable("object", cel.DynType),
		cel.Variable("oldObject", cel.DynType),
		cel.Variable("variables", cel.MapType(cel.StringType, cel.DynType)),
	)
	if err != nil {
		t.Fatal(err)
	}
	compile := func(what, expr string, want *cel.Type) cel.Program {
		ast, iss := env.Compile(expr)
		if iss.Err() != nil {
			t.Fatalf("%s: compile %q: %v", what, expr, iss.Err())
		}
		if want != nil && !ast.OutputType().IsAssignableType(want) && ast.OutputType() != cel.DynType {
			t.Fatalf("%s: %q has type %v, want %v", what, expr, ast.OutputType(), want)
		}
		prg, err := env.Program(ast)
		if err != nil {
			t.Fatalf("%s: program: %v", what, err)
		}
		return prg
	}
	e := &policyEvaluator{}
	for _, m := range p.Spec.MatchConditions {
		e.matches = append(e.matches, compile("matchCondition "+m.Name, m.Expression, cel.BoolType))
	}
	for _, v := range p.Spec.Variables {
		e.names = append(e.names, v.Name)
		e.variables = append(e.variables, compile("variable "+v.Name, v.Expression, nil))
	}
	for i, v := range p.Spec.Validations {
		e.validations = append(e.validations, compile(fmt.Sprintf("validation %d", i), v.Expression, cel.BoolType))
		var msg cel.Program
		if v.MessageExpression != "" {
			msg = compile(fmt.Sprintf("messageExpression %d", i), v.MessageExpression, cel.StringType)
		}
		e.messages = append(e.messages, msg)
		e.validationMessages = append(e.validationMessages, v.Message)
	}
	return e
}

// evaluate returns whether the policy applies to the request and, if so, the messages of
// the failed validations.
func (e *policyEvaluator) evaluate(request, object, oldObject any) (bool, []string, error) {
	vars := map[string]any{}
	act := map[string]any{"request": request, "object": object, "oldObject": oldObject, "variables": vars}
	for _, m := range e.matches {
		out, _, err := m.Eval(act)
		if err != nil {
			return false, nil, fmt.Errorf("match condition: %w", err)
		}
		if out != types.True {
			return false, nil, nil
		}
	}
	for i, v := range e.variables {
		out, _, err := v.Eval(act)
		if err != nil {
			return false, nil, fmt.Errorf("variable %s: %w", e.names[i], err)
		}
		vars[e.names[i]] = out
	}
	var denials []string
	for i, v := range e.validations {
		out, _, err := v.Eval(act)
		if err != nil {
			return true, nil, fmt.Errorf("validation %d: %w", i, err)
		}
		if out == types.True {
			continue
		}
		msg := e.validationMessages[i]
		if e.messages[i] != nil {
			m, _, err := e.messages[i].Eval(act)
			if err != nil {
				return true, nil, fmt.Errorf("messageExpression %d: %w", i, err)
			}
			msg = m.Value().(string)
		}
		if strings.Contains(msg, "\n") {
			return true, nil, fmt.Errorf("validation %d: the API server drops multi-line messages: %q", i, msg)
		}
		denials = append(denials, msg)
	}
	return true, denials, nil
}

// TestResourceSlicePolicy runs the chart's ValidatingAdmissionPolicy on admission
// requests of the plugin's service account and of others: the plugin may write only its
// own node's slices of its own driver.
func TestResourceSlicePolicy(t *testing.T) {
	objs := decodeFile(t, staticFiles[0])
	policy, binding := policyNamed(t, objs, "-resourceslices")
	if binding.Spec.PolicyName != policy.Name || len(binding.Spec.ValidationActions) != 1 ||
		binding.Spec.ValidationActions[0] != admissionregistrationv1.Deny {
		t.Fatalf("binding %s: want policy %s with validationActions [Deny], got %+v", binding.Name, policy.Name, binding.Spec)
	}
	if policy.Spec.FailurePolicy == nil || *policy.Spec.FailurePolicy != admissionregistrationv1.Fail {
		t.Errorf("failurePolicy: want Fail")
	}
	// The key the API server puts into a bound service-account token's user extra.
	if !strings.Contains(policy.Spec.Variables[0].Expression, "'"+serviceaccount.NodeNameKey+"'") {
		t.Errorf("policy does not read the %s extra: %s", serviceaccount.NodeNameKey, policy.Spec.Variables[0].Expression)
	}
	validator := compilePolicy(t, policy)

	sa := pluginServiceAccount(t, objs)
	plugin := serviceaccount.MakeUsername(sa.Namespace, sa.Name)
	onNode := func(node string) userInfo {
		return userInfo{name: plugin, extra: map[string]any{serviceaccount.NodeNameKey: []any{node}}}
	}
	slice := func(driver, node string) *resourceapi.ResourceSlice {
		s := &resourceapi.ResourceSlice{
			TypeMeta:   metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceSlice"},
			ObjectMeta: metav1.ObjectMeta{Name: "s"},
			Spec:       resourceapi.ResourceSliceSpec{Driver: driver, Pool: resourceapi.ResourcePool{Name: "p", ResourceSliceCount: 1}},
		}
		if node == "" {
			s.Spec.AllNodes = new(true)
		} else {
			s.Spec.NodeName = &node
		}
		return s
	}

	tests := []struct {
		name     string
		op       string
		user     userInfo
		obj, old *resourceapi.ResourceSlice
		wantDeny string // empty: admitted
	}{
		{"create own node", "CREATE", onNode("node-a"), slice("rdma.dra.io", "node-a"), nil, ""},
		{"update own node", "UPDATE", onNode("node-a"), slice("rdma.dra.io", "node-a"), slice("rdma.dra.io", "node-a"), ""},
		{"delete own node", "DELETE", onNode("node-a"), nil, slice("rdma.dra.io", "node-a"), ""},
		{"create other node", "CREATE", onNode("node-a"), slice("rdma.dra.io", "node-b"), nil, "not those of node node-b"},
		{"create cluster-wide", "CREATE", onNode("node-a"), slice("rdma.dra.io", ""), nil, "not cluster-wide ones"},
		{"move slice to own node", "UPDATE", onNode("node-a"), slice("rdma.dra.io", "node-a"), slice("rdma.dra.io", "node-b"), "not those of node node-b"},
		{"delete other node", "DELETE", onNode("node-a"), nil, slice("rdma.dra.io", "node-b"), "not those of node node-b"},
		{"other driver", "CREATE", onNode("node-a"), slice("gpu.example.com", "node-a"), nil, "only write ResourceSlices of driver rdma.dra.io"},
		{"token not bound to a node", "CREATE", userInfo{name: plugin}, slice("rdma.dra.io", "node-a"), nil, "not bound to a node"},
		{"two node names", "CREATE", userInfo{name: plugin, extra: map[string]any{serviceaccount.NodeNameKey: []any{"node-b", "node-a"}}},
			slice("rdma.dra.io", "node-a"), nil, "not those of node node-a"},
		{"someone else is not matched", "CREATE", userInfo{name: "system:serviceaccount:kube-system:other"}, slice("gpu.example.com", ""), nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			request := map[string]any{
				"operation": tt.op,
				"userInfo":  map[string]any{"username": tt.user.name, "extra": tt.user.extra},
			}
			applies, denials, err := validator.evaluate(request, toUnstructured(t, tt.obj), toUnstructured(t, tt.old))
			if err != nil {
				t.Fatal(err)
			}
			if !applies && tt.wantDeny != "" {
				t.Fatalf("the policy does not apply to %s", tt.user.name)
			}
			got := strings.Join(denials, "; ")
			switch {
			case tt.wantDeny == "" && got != "":
				t.Errorf("denied: %s", got)
			case tt.wantDeny != "" && !strings.Contains(got, tt.wantDeny):
				t.Errorf("denials %q, want one containing %q", got, tt.wantDeny)
			}
		})
	}
}

type userInfo struct {
	name  string
	extra map[string]any
}

// toUnstructured turns an object into the untyped form CEL sees; nil stays null.
func toUnstructured[T any](t *testing.T, obj *T) any {
	t.Helper()
	if obj == nil {
		return nil
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// policyNamed returns the ValidatingAdmissionPolicy whose name ends in suffix and its
// binding, which must deny.
func policyNamed(t *testing.T, objs []object, suffix string) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	t.Helper()
	var policy *admissionregistrationv1.ValidatingAdmissionPolicy
	for _, p := range only[*admissionregistrationv1.ValidatingAdmissionPolicy](objs) {
		if strings.HasSuffix(p.Name, suffix) {
			policy = p
		}
	}
	if policy == nil {
		t.Fatalf("no ValidatingAdmissionPolicy *%s", suffix)
	}
	for _, b := range only[*admissionregistrationv1.ValidatingAdmissionPolicyBinding](objs) {
		if b.Spec.PolicyName == policy.Name {
			return policy, b
		}
	}
	t.Fatalf("no binding of ValidatingAdmissionPolicy %s", policy.Name)
	return nil, nil
}
