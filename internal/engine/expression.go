package engine

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
)

// Expression is a compiled check chain: a boolean expression over check
// names with &&, || and ! and parentheses, the syntax of the seed's chains.
// It is evaluated with CEL; only those operators are accepted.
type Expression struct {
	source string
	names  []string // the check names it uses, sorted
	prg    cel.Program
}

// CompileExpression compiles source against the declared check names. An
// empty source is an expression that always passes. Errors give the
// position in the source ("1:9: undeclared reference to 'windw'").
func CompileExpression(source string, checks []string) (*Expression, error) {
	if strings.TrimSpace(source) == "" {
		return &Expression{source: source}, nil
	}
	opts := []cel.EnvOption{}
	for _, name := range checks {
		opts = append(opts, cel.Variable(name, cel.BoolType))
	}
	env, err := cel.NewEnv(opts...)
	if err != nil {
		return nil, err
	}
	checked, iss := env.Compile(source)
	if iss.Err() != nil {
		return nil, issuesError(iss)
	}
	if !checked.OutputType().IsExactType(cel.BoolType) {
		return nil, fmt.Errorf("the expression is a %s, not a boolean", checked.OutputType())
	}
	names := map[string]bool{}
	if err := onlyChainOperators(checked.NativeRep().Expr(), names); err != nil {
		return nil, err
	}
	prg, err := env.Program(checked)
	if err != nil {
		return nil, err
	}
	e := &Expression{source: source, prg: prg}
	for n := range names {
		e.names = append(e.names, n)
	}
	sort.Strings(e.names)
	return e, nil
}

// issuesError writes CEL's issues on one line, each as "line:column:
// message", without the copy of the source line and the caret CEL adds
// under it: the error ends up in a field error and a condition message.
func issuesError(iss *cel.Issues) error {
	msgs := make([]string, 0, len(iss.Errors()))
	for _, e := range iss.Errors() {
		msg := lineBreaks.Replace(e.Message)
		if e.Location.Line() > 0 {
			msg = fmt.Sprintf("%d:%d: %s", e.Location.Line(), e.Location.Column()+1, msg)
		}
		msgs = append(msgs, msg)
	}
	return errors.New(strings.Join(msgs, "; "))
}

// lineBreaks escapes the line breaks of the source a message quotes (a
// token CEL could not read).
var lineBreaks = strings.NewReplacer("\n", `\n`, "\r", `\r`)

// onlyChainOperators accepts identifiers joined by &&, || and !, and
// collects the identifiers.
func onlyChainOperators(e ast.Expr, names map[string]bool) error {
	switch e.Kind() {
	case ast.IdentKind:
		names[e.AsIdent()] = true
		return nil
	case ast.CallKind:
		call := e.AsCall()
		switch call.FunctionName() {
		case operators.LogicalAnd, operators.LogicalOr, operators.LogicalNot:
			for _, arg := range call.Args() {
				if err := onlyChainOperators(arg, names); err != nil {
					return err
				}
			}
			return nil
		}
		return fmt.Errorf("only check names joined by &&, || and ! are allowed, not %s", strings.Trim(call.FunctionName(), "_@"))
	default:
		return errors.New("only check names joined by &&, || and ! are allowed")
	}
}

// isCheckName says whether name can name a check: whether an expression
// of that name alone refers to the check. CEL's reserved words (in, if),
// literals (true, null) and the names of its types (int, map, type) cannot;
// the types' names would even fail every expression that declares them.
func isCheckName(name string) bool {
	e, err := CompileExpression(name, []string{name})
	return err == nil && slices.Equal(e.Names(), []string{name})
}

// Names returns the check names the expression uses, sorted.
func (e *Expression) Names() []string { return e.names }

// String returns the source.
func (e *Expression) String() string { return e.source }

// Eval evaluates the expression with each check's result. A name missing
// from results counts as not passed.
func (e *Expression) Eval(results map[string]bool) (bool, error) {
	if e.prg == nil {
		return true, nil
	}
	vars := make(map[string]any, len(e.names))
	for _, n := range e.names {
		vars[n] = results[n]
	}
	out, _, err := e.prg.Eval(vars)
	if err != nil {
		return false, err
	}
	b, ok := out.Value().(bool)
	if !ok {
		return false, fmt.Errorf("expression %q gave %v, not a boolean", e.source, out.Value())
	}
	return b, nil
}
