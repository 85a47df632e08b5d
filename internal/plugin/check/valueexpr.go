package check

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/google/cel-go/cel"
)

// valueExprCostLimit bounds what one evaluation of a value expression may
// cost: far above any comparison a user writes, far below a runaway.
const valueExprCostLimit = 10_000

// ValueExpr is a CEL expression over one number, value, that says whether
// the number is good: prometheusInstant's expr. Every number in it is a
// double, as in the maintenance-controller's expressions: 1 is 1.0, so
// value == 0 and value / 1024 > 2 mean what they say (CEL itself would
// refuse to mix an integer with the double value).
type ValueExpr struct {
	source string
	prg    cel.Program
}

// integerLiteral is an integer in an expression, not part of a name or of
// another number.
var integerLiteral = regexp.MustCompile(`(^|[^\w.])(\d+)($|[^\w.])`)

// asDoubles writes source's integer literals as doubles. A source with a
// string literal is left as it is: a number inside one is text.
func asDoubles(source string) string {
	if strings.ContainsAny(source, "\"'`") {
		return source
	}
	for {
		next := integerLiteral.ReplaceAllString(source, "${1}${2}.0${3}")
		if next == source {
			return source
		}
		source = next // overlapping matches ("1+2") take another round
	}
}

// CompileValueExpr compiles source. Errors give the position in the
// source ("1:1: undeclared reference to 'valu'").
func CompileValueExpr(source string) (*ValueExpr, error) {
	if strings.TrimSpace(source) == "" {
		return nil, errors.New("must not be empty")
	}
	env, err := cel.NewEnv(cel.Variable("value", cel.DoubleType))
	if err != nil {
		return nil, err
	}
	checked, iss := env.Compile(asDoubles(source))
	if iss.Err() != nil {
		if _, orig := env.Compile(source); orig.Err() != nil {
			iss = orig // positions in what the user wrote
		}
		msgs := make([]string, 0, len(iss.Errors()))
		for _, e := range iss.Errors() {
			msg := strings.ReplaceAll(strings.TrimSuffix(e.Message, " (in container '')"), "\n", `\n`)
			if e.Location.Line() > 0 {
				msg = fmt.Sprintf("%d:%d: %s", e.Location.Line(), e.Location.Column()+1, msg)
			}
			msgs = append(msgs, msg)
		}
		return nil, errors.New(strings.Join(msgs, "; "))
	}
	if !checked.OutputType().IsExactType(cel.BoolType) {
		return nil, fmt.Errorf("the expression is a %s, not a boolean", checked.OutputType())
	}
	prg, err := env.Program(checked, cel.CostLimit(valueExprCostLimit))
	if err != nil {
		return nil, err
	}
	return &ValueExpr{source: source, prg: prg}, nil
}

// Eval says whether value makes the expression true.
func (e *ValueExpr) Eval(value float64) (bool, error) {
	out, _, err := e.prg.Eval(map[string]any{"value": value})
	if err != nil {
		return false, fmt.Errorf("evaluating %q with value %g: %w", e.source, value, err)
	}
	b, ok := out.Value().(bool)
	if !ok {
		return false, fmt.Errorf("%q is not a boolean for value %g", e.source, value)
	}
	return b, nil
}

// String is the source.
func (e *ValueExpr) String() string { return e.source }
