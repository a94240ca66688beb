package controller

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	v1alpha1 "github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/webhook"
)

// injections are pool expressions that parse only together with the text around them
// in the class's selector, or are not one boolean expression.
var injections = []struct{ name, cel, want string }{
	{"closes the conjunction", `false) || (true`, "compilation failed"},
	{"closes with a comment", "true // x\n) || (true", "compilation failed"},
	{"selects another driver", `true) || (device.driver == "gpu.example.com"`, "compilation failed"},
	{"only a closing parenthesis", `)`, "compilation failed"},
	{"opens a parenthesis", `(true`, "compilation failed"},
	{"two expressions", `true true`, "compilation failed"},
	{"not a bool", `device.driver`, "must evaluate to bool"},
	{"an int", `1`, "must evaluate to bool"},
}

// TestPoolCELRefusesInjection: each injection is refused in every mode, and no class
// selector is written for it, instead of a selector that matches every device of every
// driver.
func TestPoolCELRefusesInjection(t *testing.T) {
	for _, mode := range v1alpha1.PoolModes {
		for _, tt := range injections {
			t.Run(string(mode)+"/"+tt.name, func(t *testing.T) {
				pool := &v1alpha1.RdmaPool{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1alpha1.RdmaPoolSpec{Mode: mode, CEL: tt.cel}}
				expr, err := ClassCEL(devicemodel.DefaultDriverName, pool)
				if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "spec.cel: ") {
					t.Fatalf("ClassCEL = %q, %v; want an error at spec.cel containing %q", expr, err, tt.want)
				}
				errs := ValidatePoolCEL(devicemodel.DefaultDriverName, pool)
				if len(errs) != 1 || errs[0].Field != "spec.cel" {
					t.Errorf("ValidatePoolCEL: %v, want one error at spec.cel", errs)
				}
			})
		}
	}
}

// TestPoolCELKeepsValidExpressions: expressions that are one boolean each stay as
// written, comments and all, and select what they say within the pool's mode only.
func TestPoolCELKeepsValidExpressions(t *testing.T) {
	for _, e := range []string{
		`device.attributes["rdma.dra.io"].numa_node == 0`,
		`device.attributes["rdma.dra.io"].numa_node == 0 || device.attributes["rdma.dra.io"].numa_node == 1 // both sockets`,
		`(true) || (false)`,
		"true\n// a comment line\n",
		`["mlx5_0", "mlx5_1"].exists(n, n == device.attributes["rdma.dra.io"].ibdev)`,
	} {
		spec := v1alpha1.RdmaPoolSpec{Mode: v1alpha1.PoolModeExclusive, CEL: e}
		expr, err := PoolCEL(devicemodel.DefaultDriverName, &spec)
		if err != nil {
			t.Errorf("%q: %v", e, err)
			continue
		}
		if _, err := CompileSelector(expr); err != nil {
			t.Errorf("%q: combined %q: %v", e, expr, err)
		}
		if errs := ValidatePoolCEL(devicemodel.DefaultDriverName, &v1alpha1.RdmaPool{Spec: spec}); len(errs) > 0 {
			t.Errorf("%q: %v", e, errs)
		}
	}
	// An always-true expression in an exclusive pool still selects the exclusive devices
	// of this driver only (selected also checks another driver's devices).
	got := selected(t, "dgx-h100", false, v1alpha1.RdmaPoolSpec{Mode: v1alpha1.PoolModeExclusive, CEL: `true || true`})
	for _, name := range got {
		if strings.HasSuffix(name, "-shared") {
			t.Errorf("exclusive pool selects shared device %s", name)
		}
	}
}

// TestCheckConjunction: the combined expression must be exactly the terms' conjunction.
func TestCheckConjunction(t *testing.T) {
	terms := []string{`device.driver == "rdma.dra.io"`, "(true\n)"}
	if err := checkConjunction(strings.Join(terms, " && "), terms); err != nil {
		t.Errorf("valid conjunction: %v", err)
	}
	// A term that escapes changes the operands.
	bad := []string{`device.driver == "rdma.dra.io"`, "(false) || (true\n)"}
	if err := checkConjunction(strings.Join(bad, " && "), []string{bad[0], "(false)", "(true)"}); err == nil {
		t.Error("an escaped || was accepted")
	}
}

// TestWebhookRefusesPoolCEL: the admission webhook, as the controller wires it, refuses
// an injected pool expression with its field path.
func TestWebhookRefusesPoolCEL(t *testing.T) {
	v := &webhook.Validator{DriverName: devicemodel.DefaultDriverName, ValidatePool: func(p *v1alpha1.RdmaPool) fieldErrors {
		return ValidatePoolCEL(devicemodel.DefaultDriverName, p)
	}}
	body := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u",` +
		`"kind":{"group":"rdma.dra.io","version":"v1alpha1","kind":"RdmaPool"},"operation":"CREATE",` +
		`"object":{"metadata":{"name":"p"},"spec":{"mode":"exclusive","cel":"false) || (true"}}}}`
	rec := httptest.NewRecorder()
	v.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, webhook.Path, strings.NewReader(body)))
	if !strings.Contains(rec.Body.String(), `"allowed":false`) || !strings.Contains(rec.Body.String(), `spec.cel: Invalid value: \"false) || (true\"`) {
		t.Errorf("response %s", rec.Body)
	}
}

type fieldErrors = field.ErrorList
