package importer

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// converter collects the problems and notes of one import. Problems are
// collected rather than returned one by one, so one run names every line
// that needs a change.
type converter struct {
	file  string
	env   func(string) (string, bool)
	errs  ErrorList
	notes []Note
	// secretName names the Secret notifications refer to; existingSecret
	// says it exists already, so the import neither writes it nor reads
	// the secret values.
	secretName     string
	existingSecret bool
}

func (c *converter) errorf(n *yaml.Node, format string, args ...any) {
	c.errs = append(c.errs, &Error{File: c.file, Line: line(n), Message: fmt.Sprintf(format, args...)})
}

func (c *converter) notef(n *yaml.Node, format string, args ...any) {
	c.notes = append(c.notes, Note{File: c.file, Line: line(n), Message: fmt.Sprintf(format, args...)})
}

func (c *converter) warnf(n *yaml.Node, format string, args ...any) {
	c.notes = append(c.notes, Note{File: c.file, Line: line(n), Warning: true, Message: fmt.Sprintf(format, args...)})
}

func line(n *yaml.Node) int {
	if n == nil {
		return 0
	}
	return n.Line
}

// yamlLine finds the line in yaml.v3's syntax errors ("yaml: line 3: ...").
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlError reports a YAML syntax error at its line.
func (c *converter) yamlError(err error) {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		c.errs = append(c.errs, &Error{File: c.file, Line: n, Message: "not valid YAML: " + m[2]})
		return
	}
	c.errs = append(c.errs, &Error{File: c.file, Message: "not valid YAML: " + strings.TrimPrefix(msg, "yaml: ")})
}

// resolve follows an alias (*name) to the node it names.
func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// isNull says whether a value is absent: missing, empty or null.
func isNull(n *yaml.Node) bool {
	n = resolve(n)
	return n == nil || (n.Kind == yaml.ScalarNode && n.Tag == "!!null")
}

// describe names a node's kind for errors.
func describe(n *yaml.Node) string {
	n = resolve(n)
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	default:
		return fmt.Sprintf("%q", n.Value)
	}
}

// field is one key of a mapping and its value.
type field struct {
	key, value *yaml.Node
}

// fields reads a mapping, refusing keys not in known and keys given twice;
// what names the mapping in errors. A null value is an empty mapping. The
// known keys found are returned even when there were problems, so the
// caller can go on and report more of them.
func (c *converter) fields(n *yaml.Node, what string, known ...string) (map[string]field, bool) {
	out := map[string]field{}
	n = resolve(n)
	if isNull(n) {
		return out, true
	}
	if n.Kind != yaml.MappingNode {
		c.errorf(n, "%s: want a mapping, got %s", what, describe(n))
		return out, false
	}
	ok := true
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch prev, seen := out[k.Value]; {
		case seen:
			c.errorf(k, "%s: %s is given twice (first at line %d)", what, k.Value, prev.key.Line)
			ok = false
		case !slices.Contains(known, k.Value):
			c.errorf(k, "%s: unknown field %q (known: %s)", what, k.Value, strings.Join(known, ", "))
			ok = false
		default:
			out[k.Value] = field{key: k, value: resolve(v)}
		}
	}
	return out, ok
}

// valueOf is the value of key in the mapping n (read with fields before,
// which reported its problems), nil when there is none.
func valueOf(n *yaml.Node, key string) *yaml.Node {
	n = resolve(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return resolve(n.Content[i+1])
		}
	}
	return nil
}

// items reads a list; null is an empty list.
func (c *converter) items(n *yaml.Node, what string) ([]*yaml.Node, bool) {
	n = resolve(n)
	if isNull(n) {
		return nil, true
	}
	if n.Kind != yaml.SequenceNode {
		c.errorf(n, "%s: want a list, got %s", what, describe(n))
		return nil, false
	}
	out := make([]*yaml.Node, len(n.Content))
	for i, item := range n.Content {
		out[i] = resolve(item)
	}
	return out, true
}

// text reads a single value; null is "".
func (c *converter) text(n *yaml.Node, what string) (string, bool) {
	n = resolve(n)
	if isNull(n) {
		return "", true
	}
	if n.Kind != yaml.ScalarNode {
		c.errorf(n, "%s: want a single value, got %s", what, describe(n))
		return "", false
	}
	return n.Value, true
}
