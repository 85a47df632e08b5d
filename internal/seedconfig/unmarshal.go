package seedconfig

import (
	"errors"
	"fmt"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"
)

// DurationError is a value of a Duration field that is not a duration.
type DurationError struct{ Value string }

func (e *DurationError) Error() string {
	return fmt.Sprintf("%q is not a duration (like 30s, 5m or 1h)", e.Value)
}

// Unmarshal reads an integration's file into out, refusing fields out
// does not have. A value that is not a duration is named by its field
// and line ("intervals.check.period (line 3): ..."), which the decoder
// alone does not say.
func Unmarshal(raw []byte, out any) error {
	err := yaml.UnmarshalStrict(raw, out)
	var bad *DurationError
	if err == nil || !errors.As(err, &bad) {
		return err
	}
	var doc yamlv3.Node
	if yamlv3.Unmarshal(raw, &doc) != nil {
		return bad
	}
	if path, line := find(&doc, nil, bad.Value); path != "" {
		return fmt.Errorf("%s (line %d): %w", path, line, bad)
	}
	return bad
}

// find returns the dotted path and line of the first scalar value v
// under n.
func find(n *yamlv3.Node, path []string, v string) (string, int) {
	switch n.Kind {
	case yamlv3.DocumentNode:
		for _, c := range n.Content {
			if p, l := find(c, path, v); p != "" {
				return p, l
			}
		}
	case yamlv3.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			at := append(path[:len(path):len(path)], k.Value)
			if val.Kind == yamlv3.ScalarNode && val.Value == v {
				return strings.Join(at, "."), val.Line
			}
			if p, l := find(val, at, v); p != "" {
				return p, l
			}
		}
	case yamlv3.SequenceNode:
		for i, c := range n.Content {
			at := append(path[:len(path):len(path)], fmt.Sprintf("[%d]", i))
			if len(path) > 0 {
				at = append(path[:len(path)-1:len(path)-1], fmt.Sprintf("%s[%d]", path[len(path)-1], i))
			}
			if c.Kind == yamlv3.ScalarNode && c.Value == v {
				return strings.Join(at, "."), c.Line
			}
			if p, l := find(c, at, v); p != "" {
				return p, l
			}
		}
	}
	return "", 0
}
