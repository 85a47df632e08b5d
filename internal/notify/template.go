package notify

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"text/template"
	"text/template/parse"
	"time"
)

// Bounds on notification templates. A profile's author writes them and
// pitstop runs them: on sample data at admission and whenever the profile
// compiles, and for every message. Go's text/template has no limits of
// its own, so a template of a few bytes
// ({{range 100000000}}{{printf "%01000000d" 0}}{{end}}) would keep a
// replica computing and allocating without end, and a webhook timing out
// would abandon the goroutine, not stop it.
const (
	// MaxTemplateSize is the longest template, in bytes; the CRD schema
	// says the same of every template field.
	MaxTemplateSize = 8 << 10
	// MaxRenderedSize is the longest text a template may render, in bytes.
	MaxRenderedSize = 64 << 10
	// maxBuilt bounds the bytes that printf, print, println, html, js and
	// urlquery may build in one execution, kept or thrown away: strings
	// grow only through them, so a string cannot be doubled until memory
	// runs out. Eight messages' worth.
	maxBuilt = 8 * MaxRenderedSize
	// maxActions bounds the actions one execution runs (each {{...}} and
	// each text between them, counted when the list holding it starts),
	// and so its work whatever loops, branches and calls it takes: an
	// action's own cost is bounded by the template's size and the node's.
	maxActions = 100_000
	// maxIterations bounds the iterations of all range loops of one
	// execution, maxCalls its template calls ({{template}}, {{block}}),
	// and so the depth of a recursion.
	maxIterations = 10_000
	maxCalls      = 1_000
)

// renderTimeout bounds one execution's time. It is a backstop: within the
// counts above a template on the sample data runs in well under a second,
// a notification in microseconds; it is long enough that a replica short
// of CPU does not fail a template that is within them. A variable only so
// that the tests of the counts can keep a loaded machine's clock out of
// their way.
var renderTimeout = time.Second

// ErrTemplateLimit says that a template went past one of the bounds above:
// its execution was stopped.
var ErrTemplateLimit = errors.New("template exceeded a limit")

// Names of the functions guard puts at the start of lists. They are valid
// identifiers, as text/template requires of function names, and are not
// defined when a template is parsed: a template naming them is refused.
const (
	actionsFunc = "pitstopActions"
	iterateFunc = "pitstopIterate"
	callFunc    = "pitstopCall"
)

// parseTemplate parses a template, makes every action, loop and template
// call of it count against the execution's budget, and runs it once on
// sample data, so that a field that does not exist ({{ .Node.Nmae }}) or
// a template that cannot run within the bounds is refused now rather than
// when the notification is due.
func parseTemplate(text string) (*template.Template, error) {
	if len(text) > MaxTemplateSize {
		return nil, fmt.Errorf("%d bytes, more than the %d a template may have", len(text), MaxTemplateSize)
	}
	t, err := template.New("").Parse(text)
	if err != nil {
		return nil, err
	}
	for _, tt := range t.Templates() {
		if tt.Tree == nil || tt.Root == nil {
			continue
		}
		if err := guard(tt.Root); err != nil {
			return nil, err
		}
		prepend(tt.Root, callFunc)
	}
	if _, err := execute(t, sample); err != nil {
		return nil, err
	}
	return t, nil
}

// guard makes a list and the lists in it pay for what they run: each list
// starts with {{pitstopActions N}}, N its number of nodes, and a range
// body also with {{pitstopIterate}}. text/template has no hook per action
// or iteration, and a loop whose body writes nothing
// ({{range 100000000}}{{end}}) never reaches the writer; a function call
// at the start of the body runs on every iteration and, by returning an
// error once the budget is spent, stops the execution. A range over a
// number literal above maxIterations can only fail, and is refused now.
func guard(list *parse.ListNode) error {
	if list == nil {
		return nil
	}
	for _, n := range list.Nodes {
		var branch *parse.BranchNode
		switch n := n.(type) {
		case *parse.IfNode:
			branch = &n.BranchNode
		case *parse.WithNode:
			branch = &n.BranchNode
		case *parse.RangeNode:
			if lit := numberLiteral(n.Pipe); lit != nil && ((lit.IsInt && lit.Int64 > maxIterations) || (lit.IsUint && lit.Uint64 > maxIterations)) {
				return fmt.Errorf("range over %s: more than the %d iterations a template may run", lit.Text, maxIterations)
			}
			branch = &n.BranchNode
		default:
			continue
		}
		if err := guard(branch.List); err != nil {
			return err
		}
		if err := guard(branch.ElseList); err != nil {
			return err
		}
		if n.Type() == parse.NodeRange {
			prepend(branch.List, iterateFunc)
		}
	}
	prepend(list, actionsFunc, &parse.NumberNode{NodeType: parse.NodeNumber, Pos: list.Pos, IsInt: true, Int64: int64(len(list.Nodes)), Text: strconv.Itoa(len(list.Nodes))})
	return nil
}

// numberLiteral is the number a range pipeline is, if it is only that.
func numberLiteral(p *parse.PipeNode) *parse.NumberNode {
	if p == nil || len(p.Cmds) != 1 || len(p.Cmds[0].Args) != 1 {
		return nil
	}
	lit, _ := p.Cmds[0].Args[0].(*parse.NumberNode)
	return lit
}

// prepend puts {{fn args...}} at the start of list. The nodes have no
// tree: an error at them is located by the template running them, at
// list's position.
func prepend(list *parse.ListNode, fn string, args ...parse.Node) {
	ident := parse.NewIdentifier(fn).SetPos(list.Pos)
	cmd := &parse.CommandNode{NodeType: parse.NodeCommand, Pos: list.Pos, Args: append([]parse.Node{ident}, args...)}
	pipe := &parse.PipeNode{NodeType: parse.NodePipe, Pos: list.Pos, Cmds: []*parse.CommandNode{cmd}}
	list.Nodes = append([]parse.Node{&parse.ActionNode{NodeType: parse.NodeAction, Pos: list.Pos, Pipe: pipe}}, list.Nodes...)
}

// execute runs t on data within the bounds. Each execution has its own
// budget, so t is cloned (cheap: the parse trees are shared) and given
// functions that spend it.
func execute(t *template.Template, data any) (string, error) {
	b := &budget{deadline: time.Now().Add(renderTimeout)}
	run, err := t.Clone()
	if err != nil {
		return "", err
	}
	run.Funcs(b.funcs())
	w := &boundedWriter{budget: b}
	err = run.Execute(w, data)
	if b.err != nil {
		return "", b.err // text/template's wrapping would only repeat it
	}
	if err != nil {
		return "", err
	}
	return w.buf.String(), nil
}

// budget is what one execution may still do. The first bound it passes is
// kept in err, and every later call fails with it.
type budget struct {
	deadline                   time.Time
	actions, iterations, calls int
	built                      int
	err                        error
}

func (b *budget) fail(format string, args ...any) error {
	if b.err == nil {
		b.err = fmt.Errorf("%w: "+format, append([]any{ErrTemplateLimit}, args...)...)
	}
	return b.err
}

// check fails once the execution is past its deadline.
func (b *budget) check() error {
	if b.err != nil {
		return b.err
	}
	if time.Now().After(b.deadline) {
		return b.fail("ran longer than %s", renderTimeout)
	}
	return nil
}

func (b *budget) run(actions int) (string, error) {
	if b.actions += actions; b.actions > maxActions {
		return "", b.fail("more than %d actions", maxActions)
	}
	return "", b.check()
}

func (b *budget) iterate() (string, error) {
	if b.iterations++; b.iterations > maxIterations {
		return "", b.fail("more than %d range iterations", maxIterations)
	}
	return "", b.check()
}

func (b *budget) call() (string, error) {
	if b.calls++; b.calls > maxCalls {
		return "", b.fail("more than %d template calls", maxCalls)
	}
	return "", b.check()
}

// build spends n bytes built by a string function.
func (b *budget) build(n int) error {
	if b.built += n; b.built > maxBuilt {
		return b.fail("its functions built more than %d bytes", maxBuilt)
	}
	return b.check()
}

// funcs replace the builtins that build strings with ones that spend the
// budget, and add the counters guard calls.
func (b *budget) funcs() template.FuncMap {
	return template.FuncMap{
		actionsFunc: b.run,
		iterateFunc: b.iterate,
		callFunc:    b.call,
		"printf":    b.printf,
		"print":     func(args ...any) (string, error) { return b.sprint(fmt.Sprint, args) },
		"println":   func(args ...any) (string, error) { return b.sprint(fmt.Sprintln, args) },
		"html":      func(args ...any) (string, error) { return b.escape(template.HTMLEscapeString, args) },
		"js":        func(args ...any) (string, error) { return b.escape(template.JSEscapeString, args) },
		"urlquery":  func(args ...any) (string, error) { return b.escape(url.QueryEscape, args) },
	}
}

// printf is fmt.Sprintf, each argument formatted apart through arg so that
// no more than the budget is built: fmt would build the whole result
// before anything could count it (a thousand %01000000d are a gigabyte).
func (b *budget) printf(format string, args ...any) (string, error) {
	if takesWidthFromArgument(format) {
		// Every argument is an arg, never the int fmt wants there.
		return "", errors.New("printf: a width or precision from an argument (*) is not supported")
	}
	if err := b.build(len(format)); err != nil {
		return "", err
	}
	wrapped := make([]any, len(args))
	for i, a := range args {
		wrapped[i] = arg{value: a, budget: b}
	}
	s := fmt.Sprintf(format, wrapped...)
	return s, b.check()
}

// sprint is fmt.Sprint or fmt.Sprintln within the budget. Strings are
// passed as they are (their size is known, and fmt puts spaces only
// between operands that are not strings); anything else goes through arg.
func (b *budget) sprint(sprint func(...any) string, args []any) (string, error) {
	wrapped := make([]any, len(args))
	for i, a := range args {
		if s, ok := a.(string); ok {
			if err := b.build(len(s)); err != nil {
				return "", err
			}
			wrapped[i] = s
			continue
		}
		wrapped[i] = arg{value: a, budget: b}
	}
	s := sprint(wrapped...)
	return s, b.check()
}

// escape is the builtin html, js or urlquery: the arguments printed as the
// builtins print them, then escaped, within the budget.
func (b *budget) escape(esc func(string) string, args []any) (string, error) {
	s, ok := "", false
	if len(args) == 1 {
		s, ok = args[0].(string)
	}
	if !ok {
		for i, a := range args {
			args[i] = printable(a)
		}
		var err error
		if s, err = b.sprint(fmt.Sprint, args); err != nil {
			return "", err
		}
	}
	// Escaping makes a text at most six times longer.
	if err := b.build(6 * len(s)); err != nil {
		return "", err
	}
	return esc(s), nil
}

var (
	stringerType = reflect.TypeFor[fmt.Stringer]()
	errorType    = reflect.TypeFor[error]()
)

// printable is how text/template's html, js and urlquery print an
// argument: a pointer by what it points to, unless it has a String or
// Error method.
func printable(a any) any {
	v := reflect.ValueOf(a)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Type().Implements(stringerType) || v.Type().Implements(errorType) {
		return a
	}
	return v.Elem().Interface()
}

// arg is one argument of printf, print or println. fmt formats it through
// Format, which formats the value apart and hands the text on only while
// the budget allows; once it is spent, nothing more is built.
type arg struct {
	value  any
	budget *budget
}

// Format implements fmt.Formatter.
func (a arg) Format(f fmt.State, verb rune) {
	b := a.budget
	if b.err != nil {
		return
	}
	// Padding is built before anything could count it; fmt allows widths
	// and precisions up to a million.
	width, _ := f.Width()
	precision, _ := f.Precision()
	if max(width, precision) > maxBuilt-b.built {
		b.fail("a width or precision of %d is more than its functions may build", max(width, precision))
		return
	}
	s := fmt.Sprintf(fmt.FormatString(f, verb), a.value)
	if b.build(len(s)) != nil {
		return
	}
	_, _ = f.Write([]byte(s))
}

// takesWidthFromArgument says whether a printf format has a directive
// whose width or precision is an argument (%*d, %.*f).
func takesWidthFromArgument(format string) bool {
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		for i++; i < len(format) && strings.IndexByte("+-# 0123456789.[]*", format[i]) >= 0; i++ {
			if format[i] == '*' {
				return true
			}
		}
	}
	return false
}

// boundedWriter keeps what a template writes, up to MaxRenderedSize, and
// stops the execution past that or past its deadline: text/template stops
// at the first write that fails.
type boundedWriter struct {
	buf    bytes.Buffer
	budget *budget
}

func (w *boundedWriter) Write(p []byte) (int, error) {
	if w.buf.Len()+len(p) > MaxRenderedSize {
		return 0, w.budget.fail("the text is longer than %d bytes", MaxRenderedSize)
	}
	if err := w.budget.check(); err != nil {
		return 0, err
	}
	return w.buf.Write(p)
}
