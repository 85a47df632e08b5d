package importer

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

// pluginConfig reads the config block of one instance, reporting problems
// at the line of the field, or of the instance when the field is missing.
// It is as lenient as the seed's go-ucfg about how scalars are written
// (max: "2" is a number, remove: "yes" a boolean) and stricter about names:
// an unknown field is an error, because the seed ignores it silently and
// the import cannot know what was meant.
type pluginConfig struct {
	c      *converter
	what   string
	at     *yaml.Node
	fields map[string]field
}

func (c *converter) pluginConfig(inst *instance, cfg *yaml.Node, known ...string) *pluginConfig {
	p := &pluginConfig{c: c, what: inst.what(), at: inst.node}
	if !isNull(cfg) {
		p.at = cfg
	}
	p.fields, _ = c.fields(cfg, inst.what()+": config", known...)
	return p
}

// node returns a field's value, nil when it is not given.
func (p *pluginConfig) node(key string) *yaml.Node {
	if isNull(p.fields[key].value) {
		return nil
	}
	return p.fields[key].value
}

func (p *pluginConfig) has(key string) bool { return p.node(key) != nil }

// line is the node a message about key points at: the field, or the
// instance when the field is missing.
func (p *pluginConfig) line(key string) *yaml.Node {
	if at := p.node(key); at != nil {
		return at
	}
	return p.at
}

func (p *pluginConfig) errorf(key string, format string, args ...any) {
	p.c.errorf(p.line(key), "%s: %s: %s", p.what, key, fmt.Sprintf(format, args...))
}

func (p *pluginConfig) warnf(key string, format string, args ...any) {
	p.c.warnf(p.line(key), "%s: %s", p.what, fmt.Sprintf(format, args...))
}

func (p *pluginConfig) notef(key string, format string, args ...any) {
	p.c.notef(p.line(key), "%s: %s", p.what, fmt.Sprintf(format, args...))
}

// str reads a single value; a required one must not be empty.
func (p *pluginConfig) str(key string, required bool) string {
	n := p.node(key)
	if n == nil {
		if required {
			p.errorf(key, "is required")
		}
		return ""
	}
	s, ok := p.c.text(n, p.what+": "+key)
	if ok && s == "" && required {
		p.errorf(key, "must not be empty")
	}
	return s
}

// maxKeyLength is the CRD's bound on the label, annotation and finalizer
// keys of checks and triggers.
const maxKeyLength = 317

// key reads the required key of a label, annotation or finalizer plugin.
func (p *pluginConfig) key() string {
	k := p.str("key", true)
	if len(k) > maxKeyLength {
		p.errorf("key", "is %d characters long, pitstop allows %d", len(k), maxKeyLength)
	}
	return k
}

// optional reads a single value, nil when not given or empty: the seed
// treats an empty value as no value.
func (p *pluginConfig) optional(key string) *string {
	if s := p.str(key, false); s != "" {
		return &s
	}
	return nil
}

func (p *pluginConfig) int32(key string, required bool) int32 {
	s := p.str(key, required)
	if s == "" {
		return 0
	}
	v, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		p.errorf(key, "%q is not a whole number", s)
	}
	return int32(v)
}

func (p *pluginConfig) boolean(key string) bool {
	s := p.str(key, false)
	switch strings.ToLower(s) {
	case "", "false", "no", "off", "0":
		return false
	case "true", "yes", "on", "1":
		return true
	}
	p.errorf(key, "%q is not true or false", s)
	return false
}

// duration reads a Go duration ("90m", "1h30m").
func (p *pluginConfig) duration(key string, required bool) pitstopv1alpha1.Duration {
	s := p.str(key, required)
	if s == "" {
		return pitstopv1alpha1.Duration{}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		p.errorf(key, "%q is not a duration such as 90m or 1h30m", s)
	}
	return pitstopv1alpha1.Duration{Duration: d}
}

// durationOr reads an optional duration, def when it is not given: the
// seed's own default for the field.
func (p *pluginConfig) durationOr(key string, def time.Duration) pitstopv1alpha1.Duration {
	if !p.has(key) {
		return pitstopv1alpha1.Duration{Duration: def}
	}
	return p.duration(key, false)
}

// clock reads "hh:mm" as the seed's time.Parse("15:04") does (so "9:00"
// is accepted) and writes it back in the two-digit form pitstop requires.
func (p *pluginConfig) clock(key string) (time.Time, bool) {
	s := p.str(key, true)
	if s == "" {
		return time.Time{}, false
	}
	t, err := time.Parse("15:04", s)
	if err != nil {
		p.errorf(key, "%q is not a time of day as hh:mm", s)
		return time.Time{}, false
	}
	return t, true
}

// list reads a list of single values.
func (p *pluginConfig) list(key string, required bool) []string {
	n := p.node(key)
	if n == nil {
		if required {
			p.errorf(key, "is required")
		}
		return nil
	}
	items, ok := p.c.items(n, p.what+": "+key)
	if !ok {
		return nil
	}
	out := make([]string, 0, len(items))
	for i, item := range items {
		if s, ok := p.c.text(item, fmt.Sprintf("%s: %s[%d]", p.what, key, i)); ok && s != "" {
			out = append(out, s)
		}
	}
	if required && len(out) == 0 {
		p.errorf(key, "must list at least one value")
	}
	return out
}

// seedWeekdays are the weekday names the seed accepts (its
// common.WeekdayFromString, case-insensitive).
var seedWeekdays = map[string]pitstopv1alpha1.Weekday{
	"monday": "Mon", "mon": "Mon",
	"tuesday": "Tue", "tue": "Tue",
	"wednesday": "Wed", "wed": "Wed",
	"thursday": "Thu", "thu": "Thu",
	"friday": "Fri", "fri": "Fri",
	"saturday": "Sat", "sat": "Sat",
	"sunday": "Sun", "sun": "Sun",
}

// weekdays reads a list of the seed's weekday names as pitstop's
// three-letter ones, each once, in the order given.
func (p *pluginConfig) weekdays(key string, required bool) []pitstopv1alpha1.Weekday {
	var out []pitstopv1alpha1.Weekday
	for _, s := range p.list(key, required) {
		d, ok := seedWeekdays[strings.ToLower(s)]
		if !ok {
			p.errorf(key, "%q is not a weekday (monday … sunday, or mon … sun)", s)
			continue
		}
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}
