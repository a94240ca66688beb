package controller

import (
	"fmt"
	"strings"

	"github.com/google/cel-go/cel"
	exprpb "google.golang.org/genproto/googleapis/api/expr/v1alpha1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"k8s.io/apimachinery/pkg/util/validation/field"

	v1alpha1 "github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
)

// userTerm returns the pool's own expression as a term of the class's conjunction. The
// expression is parsed and type-checked alone, in the allocator's environment, before it
// is combined with anything: text that only parses together with its surroundings
// ("false) || (true") is refused here instead of escaping the conjunction.
func userTerm(expr string) (string, error) {
	if len(expr) > v1alpha1.MaxCELLength {
		return "", fmt.Errorf("expression is %d bytes long, at most %d are allowed", len(expr), v1alpha1.MaxCELLength)
	}
	// CompileSelector applies the allocator's rule for the result: a bool, or an
	// attribute value, which must be a bool when the scheduler evaluates it.
	if _, err := CompileSelector(expr); err != nil {
		return "", err
	}
	// The parentheses keep the expression one operand; the newline ends a trailing //
	// comment. checkConjunction verifies the result.
	return "(" + expr + "\n)", nil
}

// checkConjunction verifies that expr, the terms joined with &&, parses to exactly
// the conjunction of the terms each parsed alone: the same operands, in order, and
// nothing else. It is the last line against a term whose text changes meaning when
// combined.
func checkConjunction(expr string, terms []string) error {
	env := celCompiler.CompileCELExpression("true", selectorOptions).Environment
	if env == nil {
		return fmt.Errorf("load the CEL environment")
	}
	parse := func(s string) ([]*exprpb.Expr, error) {
		ast, iss := env.Parse(s)
		if iss.Err() != nil {
			return nil, iss.Err()
		}
		pe, err := cel.AstToParsedExpr(ast)
		if err != nil {
			return nil, err
		}
		return conjuncts(pe.GetExpr(), nil), nil
	}
	got, err := parse(expr)
	if err != nil {
		return fmt.Errorf("parse the combined expression: %w", err)
	}
	var want []*exprpb.Expr
	for _, t := range terms {
		leaves, err := parse(t)
		if err != nil {
			return fmt.Errorf("parse term %q: %w", t, err)
		}
		want = append(want, leaves...)
	}
	if len(got) != len(want) {
		return fmt.Errorf("the combined expression has %d operands, its terms %d", len(got), len(want))
	}
	for i := range got {
		if !proto.Equal(withoutIDs(got[i]), withoutIDs(want[i])) {
			return fmt.Errorf("operand %d of the combined expression differs from its term", i)
		}
	}
	return nil
}

// conjuncts appends the operands of nested && calls to out, left to right; the parser
// may balance a chain of && into a tree of any shape.
func conjuncts(e *exprpb.Expr, out []*exprpb.Expr) []*exprpb.Expr {
	if c := e.GetCallExpr(); c != nil && c.GetTarget() == nil && c.GetFunction() == "_&&_" && len(c.GetArgs()) == 2 {
		out = conjuncts(c.GetArgs()[0], out)
		return conjuncts(c.GetArgs()[1], out)
	}
	return append(out, e)
}

// withoutIDs returns a copy of e with every node ID zeroed: IDs depend on the position
// of a node in the whole expression, the structure does not.
func withoutIDs(e *exprpb.Expr) *exprpb.Expr {
	out := proto.Clone(e).(*exprpb.Expr)
	var clear func(m protoreflect.Message)
	clear = func(m protoreflect.Message) {
		m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			switch {
			case fd.Name() == "id" && fd.Kind() == protoreflect.Int64Kind:
				m.Clear(fd)
			case fd.IsList() && fd.Message() != nil:
				for i := 0; i < v.List().Len(); i++ {
					clear(v.List().Get(i).Message())
				}
			case fd.IsMap() && fd.MapValue().Message() != nil:
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					clear(mv.Message())
					return true
				})
			case fd.Message() != nil && !fd.IsList() && !fd.IsMap():
				clear(v.Message())
			}
			return true
		})
	}
	clear(out.ProtoReflect())
	return out
}

// ValidatePoolCEL checks what of an RdmaPool needs the allocator's CEL environment: its
// own expression alone (at spec.cel) and the class's whole selector (at spec). The
// admission webhook calls it, so that a pool the controller would refuse is refused at
// kubectl apply with its field path.
func ValidatePoolCEL(driverName string, pool *v1alpha1.RdmaPool) field.ErrorList {
	if e := strings.TrimSpace(pool.Spec.CEL); e != "" {
		if _, err := userTerm(e); err != nil {
			return field.ErrorList{field.Invalid(field.NewPath("spec", "cel"), truncate(pool.Spec.CEL), err.Error())}
		}
	}
	expr, err := ClassCEL(driverName, pool)
	if err == nil {
		_, err = CompileSelector(expr)
	}
	if err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("spec"), "", "the pool's DeviceClass selector: "+err.Error())}
	}
	return nil
}

// truncate keeps error messages short when quoting a long value back.
func truncate(s string) string {
	const limit = 256
	if len(s) <= limit {
		return s
	}
	return s[:limit] + "..."
}
