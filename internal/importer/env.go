package importer

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// expand replaces references to environment variables in every value under
// n, never in keys, as the seed's go-ucfg does (ResolveEnv, VarExp):
//
//   - ${NAME} is the variable's value; an unset variable is an error;
//   - ${NAME:default} is default when NAME is unset;
//   - ${NAME:?message} is an error saying message when NAME is unset;
//   - $${ is a literal ${.
//
// A reference may be part of a longer value ("https://${HOST}/"). go-ucfg
// also resolves ${a.b} against other keys of the file before the
// environment; the seed's documentation promises environment variables
// only, and so does the import. It is applied only to what is imported, so
// the secrets of dropped notification instances need not be set.
func (c *converter) expand(n *yaml.Node) {
	if n == nil {
		return
	}
	switch n.Kind {
	case yaml.ScalarNode:
		if !strings.Contains(n.Value, "${") {
			return
		}
		v, err := expandString(n.Value, c.env)
		if err != nil {
			c.errorf(n, "%v", err)
			return
		}
		n.Value = v
	case yaml.MappingNode:
		for i := 1; i < len(n.Content); i += 2 {
			c.expand(n.Content[i])
		}
	case yaml.SequenceNode:
		for _, item := range n.Content {
			c.expand(item)
		}
	}
	// An alias is expanded where its anchor is defined.
}

// expandString replaces the references in one value.
func expandString(s string, env func(string) (string, bool)) (string, error) {
	var b strings.Builder
	rest := s
	for {
		i := strings.Index(rest, "${")
		if i < 0 {
			b.WriteString(rest)
			return b.String(), nil
		}
		if i > 0 && rest[i-1] == '$' {
			b.WriteString(rest[:i-1] + "${")
			rest = rest[i+2:]
			continue
		}
		b.WriteString(rest[:i])
		end := strings.IndexByte(rest[i+2:], '}')
		if end < 0 {
			return "", fmt.Errorf("%q: ${ without a closing }", s)
		}
		v, err := lookupVariable(rest[i+2:i+2+end], env)
		if err != nil {
			return "", err
		}
		b.WriteString(v)
		rest = rest[i+2+end+1:]
	}
}

// lookupVariable resolves the inside of one ${...}.
func lookupVariable(ref string, env func(string) (string, bool)) (string, error) {
	name, alt, hasAlt := strings.Cut(ref, ":")
	name = strings.TrimSpace(name)
	if name == "" {
		return "", fmt.Errorf("${%s}: no variable name", ref)
	}
	if v, ok := env(name); ok {
		return v, nil
	}
	switch {
	case !hasAlt:
		return "", fmt.Errorf("environment variable %s is not set (${%s})", name, ref)
	case strings.HasPrefix(alt, "?"):
		return "", fmt.Errorf("environment variable %s is not set: %s", name, alt[1:])
	default:
		return alt, nil
	}
}
