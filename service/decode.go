package service

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"denoiser/online"
)

// The configuration is decoded here rather than by yaml.v3 into the
// struct: yaml.v3 truncates 3.5 into an int, names Go types in its errors
// ("cannot unmarshal !!int `10` into time.Duration") and cannot take a
// comma-separated string for a list. The file, DENOISER_* variables and
// --set all go through parseValue, so a value means the same in each.

var durationType = reflect.TypeOf(time.Duration(0))

// leaf is one setting of Config: its dotted path and field index.
type leaf struct {
	path  string
	index []int
}

func leaves() []leaf {
	var out []leaf
	walk(reflect.TypeOf(Config{}), "", func(path string, index []int) { out = append(out, leaf{path, index}) })
	return out
}

func findLeaf(path string) (leaf, bool) {
	for _, l := range leaves() {
		if l.path == path {
			return l, true
		}
	}
	return leaf{}, false
}

// keysUnder lists the keys directly under section ("" for the top level,
// "kafka", "model", ...), in declaration order, and whether it is a section.
func keysUnder(section string) ([]string, bool) {
	prefix := ""
	if section != "" {
		prefix = section + "."
	}
	var keys []string
	for _, l := range leaves() {
		rest, ok := strings.CutPrefix(l.path, prefix)
		if !ok {
			continue
		}
		key, _, _ := strings.Cut(rest, ".")
		if !slices.Contains(keys, key) {
			keys = append(keys, key)
		}
	}
	return keys, len(keys) > 0 && !slices.ContainsFunc(leaves(), func(l leaf) bool { return l.path == section })
}

// unknownKey says that key is not a setting of section, and which is meant.
func unknownKey(section, key string) string {
	keys, _ := keysUnder(section)
	best, bestDist := "", math.MaxInt
	for _, k := range keys {
		if d := editDistance(key, k); d < bestDist {
			best, bestDist = k, d
		}
	}
	if bestDist <= max(1, len(key)/3) {
		return fmt.Sprintf("unknown setting (did you mean %s?)", best)
	}
	where := "here"
	if section != "" {
		where = "in " + section
	}
	return fmt.Sprintf("unknown setting (the settings %s: %s)", where, strings.Join(keys, ", "))
}

// SectionKeys lists the keys directly under path when it names a section
// of the configuration ("model", "kafka"), nil when it does not.
func SectionKeys(path string) []string {
	keys, isSection := keysUnder(path)
	if !isSection {
		return nil
	}
	return keys
}

// NearestEnv is the variable of a setting that name, a DENOISER_*
// variable that names none, most likely means ("" if none is near): the
// nearest by edit distance, within a third of its length.
func NearestEnv(name string) string {
	rest := strings.TrimPrefix(name, EnvPrefix)
	best, bestDist := "", len(rest)/3+1
	for _, p := range Paths() {
		env := EnvName(p)
		if d := editDistance(rest, strings.TrimPrefix(env, EnvPrefix)); d < bestDist {
			best, bestDist = env, d
		}
	}
	return best
}

// editDistance is the edit distance of a and b, counting a swap of two
// neighbouring letters as one edit (optimal string alignment).
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// decodeYAML sets c from the YAML document b, returning the paths it set
// and every problem, each naming its line and setting.
func (c *Config) decodeYAML(b []byte) (set []string, err error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		if line, why := misindented(b); line > 0 {
			return nil, fmt.Errorf("%w (line %d %s)", err, line, why)
		}
		return nil, err
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, nil // an empty file
	}
	var errs []error
	lines := map[string]int{}
	var section func(n *yaml.Node, prefix string)
	section = func(n *yaml.Node, prefix string) {
		n = resolveAlias(n)
		if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
			return
		}
		if n.Kind != yaml.MappingNode {
			name := prefix
			if name == "" {
				name = "the file"
			}
			keys, _ := keysUnder(prefix)
			errs = append(errs, fmt.Errorf("line %d: %s: want settings under it (%s)", n.Line, name, strings.Join(keys, ", ")))
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			path := k.Value
			if prefix != "" {
				path = prefix + "." + k.Value
			}
			if l, ok := findLeaf(path); ok {
				if first, dup := lines[path]; dup {
					errs = append(errs, fmt.Errorf("line %d: %s: set twice (first on line %d)", k.Line, path, first))
					continue
				}
				lines[path] = k.Line
				ok, err := setNode(reflect.ValueOf(c).Elem().FieldByIndex(l.index), path, resolveAlias(v))
				if err != nil {
					errs = append(errs, fmt.Errorf("line %d: %s: %w", v.Line, path, err))
				} else if ok {
					set = append(set, path)
				}
				continue
			}
			if _, isSection := keysUnder(path); isSection {
				section(v, path)
				continue
			}
			errs = append(errs, fmt.Errorf("line %d: %s: %s", k.Line, path, unknownKey(prefix, k.Value)))
		}
	}
	section(doc.Content[0], "")
	return set, errors.Join(errs...)
}

func resolveAlias(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// setNode sets f from a YAML node; false when the node is null (the
// setting keeps its default).
func setNode(f reflect.Value, path string, n *yaml.Node) (bool, error) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return false, nil
	}
	if f.Kind() == reflect.Slice {
		switch n.Kind {
		case yaml.ScalarNode: // "a:9092,b:9092", as the flag and the variable take it
			return true, setValue(f, path, n.Value)
		case yaml.SequenceNode:
			s := reflect.MakeSlice(f.Type(), 0, len(n.Content))
			for _, e := range n.Content {
				e = resolveAlias(e)
				if e.Kind != yaml.ScalarNode {
					return false, fmt.Errorf("line %d: a list of single values is wanted", e.Line)
				}
				v := reflect.New(f.Type().Elem()).Elem()
				if err := parseValue(v, path, e.Value); err != nil {
					return false, err
				}
				s = reflect.Append(s, v)
			}
			f.Set(s)
			return true, nil
		}
		return false, errors.New("a list is wanted, such as [a, b] or \"a,b\"")
	}
	if n.Kind != yaml.ScalarNode {
		return false, fmt.Errorf("a single value is wanted, such as %s", example(path))
	}
	return true, parseValue(f, path, n.Value)
}

// setValue sets f from its text form: strings as they are, lists
// comma-separated (or a YAML flow list "[a, b]"), and numbers, booleans and
// durations as parseValue reads them.
func setValue(f reflect.Value, path, value string) error {
	if f.Kind() != reflect.Slice {
		return parseValue(f, path, value)
	}
	if strings.HasPrefix(strings.TrimSpace(value), "[") {
		var n yaml.Node
		if err := yaml.Unmarshal([]byte(value), &n); err != nil || len(n.Content) == 0 {
			return fmt.Errorf("%q is not a list; write a, b or [a, b]", value)
		}
		_, err := setNode(f, path, n.Content[0])
		return err
	}
	s := reflect.MakeSlice(f.Type(), 0, 4)
	if strings.TrimSpace(value) != "" {
		for _, part := range strings.Split(value, ",") {
			e := reflect.New(f.Type().Elem()).Elem()
			if err := parseValue(e, path, strings.TrimSpace(part)); err != nil {
				return err
			}
			s = reflect.Append(s, e)
		}
	}
	f.Set(s)
	return nil
}

// parseValue sets the single-valued f from text; its errors say what kind
// of value path wants, with an example, and never name a Go type.
func parseValue(f reflect.Value, path, text string) error {
	text = strings.TrimSpace(text)
	switch {
	case f.Kind() == reflect.String:
		f.SetString(text)
	case f.Type() == durationType:
		d, err := time.ParseDuration(text)
		if err != nil {
			if _, nerr := strconv.ParseFloat(text, 64); nerr == nil {
				return fmt.Errorf("%s has no unit; write a duration such as %s (units: ms, s, m, h)", text, example(path))
			}
			return fmt.Errorf("%q is not a duration; write one such as %s (units: ms, s, m, h)", text, example(path))
		}
		f.SetInt(int64(d))
	case f.CanInt():
		v, err := strconv.ParseInt(text, 0, f.Type().Bits())
		if err != nil {
			return numberError(path, text, "an integer", err)
		}
		f.SetInt(v)
	case f.CanUint():
		v, err := strconv.ParseUint(text, 0, f.Type().Bits())
		if err != nil {
			if strings.HasPrefix(text, "-") {
				return fmt.Errorf("%s is negative; an integer of 0 or more is wanted, such as %s", text, example(path))
			}
			return numberError(path, text, "an integer", err)
		}
		f.SetUint(v)
	case f.CanFloat():
		v, err := strconv.ParseFloat(text, f.Type().Bits())
		if err != nil {
			return numberError(path, text, "a number", err)
		}
		f.SetFloat(v)
	case f.Kind() == reflect.Bool:
		switch strings.ToLower(text) {
		case "true", "yes", "on":
			f.SetBool(true)
		case "false", "no", "off":
			f.SetBool(false)
		default:
			return fmt.Errorf("%q is not true or false", text)
		}
	default:
		panic(fmt.Sprintf("service: setting %s has no text form", path)) // a Config field of a new kind
	}
	return nil
}

func numberError(path, text, want string, err error) error {
	if errors.Is(err, strconv.ErrRange) {
		return fmt.Errorf("%s is out of range; %s is wanted, such as %s", text, want, example(path))
	}
	if _, ferr := strconv.ParseFloat(text, 64); ferr == nil {
		return fmt.Errorf("%s is not a whole number; %s is wanted, such as %s", text, want, example(path))
	}
	return fmt.Errorf("%q is not a number; %s is wanted, such as %s", text, want, example(path))
}

// defaultsOf is c with every default filled in, the model's included
// (classes is the K the mode implies).
func defaultsOf(c Config) Config {
	c = c.WithDefaults()
	c.Model = effectiveModel(c.Model)
	return c
}

// effectiveModel is m with its defaults, and Classes the number of classes
// the mode implies (binary: 2; dwell: one more than the thresholds),
// which online.Config leaves at 0 outside rating mode; likewise the
// admission threshold 1 and the sketch width, which online.Config leaves
// at 0 when ids are admitted at first sight.
func effectiveModel(m online.Config) online.Config {
	m = m.WithDefaults()
	if m.Mode != online.ModeRating && m.Classes == 0 {
		m.Classes = m.K()
	}
	if m.AdmitAfter == 0 {
		m.AdmitAfter = 1
	}
	if m.AdmitSketchWidth == 0 {
		m.AdmitSketchWidth = online.Config{AdmitAfter: 2}.WithDefaults().AdmitSketchWidth
	}
	return m
}

// example is a value of path to show in a message: its default where it
// has one.
func example(path string) string {
	l, ok := findLeaf(path)
	if !ok {
		return "..."
	}
	d := defaultsOf(Config{Kafka: KafkaConfig{InputTopic: "clicks"}})
	v := reflect.ValueOf(d).FieldByIndex(l.index)
	if !v.IsZero() && v.Kind() != reflect.Slice {
		return formatValue(v)
	}
	switch {
	case v.Type() == durationType:
		return "30s"
	case v.Kind() == reflect.Slice:
		return "a,b"
	case v.CanFloat():
		return "0.5"
	}
	return "5"
}

// formatValue is v's text form as parseValue reads it.
func formatValue(v reflect.Value) string {
	if v.Type() == durationType {
		s := time.Duration(v.Int()).String()
		if strings.HasSuffix(s, "m0s") {
			s = strings.TrimSuffix(s, "0s")
		}
		if strings.HasSuffix(s, "h0m") {
			s = strings.TrimSuffix(s, "0m")
		}
		return s
	}
	return fmt.Sprint(v.Interface())
}

// zeroHints say, for the settings whose zero a reader may take for
// "none" or "at once", what to write instead.
var zeroHints = map[string]string{
	"kafka.retry_for":        "to stop at the first failed batch write 1ms",
	"kafka.batch_timeout":    "to send partial batches at once write 1ms",
	"kafka.fetch_max_wait":   "for the shortest wait write 1ms",
	"model.warm_up":          "for no warm-up to speak of write 1",
	"seed":                   "any other seed is a seed of its own",
	"checkpoint.gc_interval": "Badger's garbage collection cannot be turned off",
}

// checkExplicitZeros rejects the settings given explicitly as zero (0, 0s,
// "", []) whose zero would silently mean a default that is not zero:
// `retry_for: 0s` would retry for a minute, `seed: 0` would be seed 1.
func checkExplicitZeros(c Config, explicit []string) error {
	d := c.WithDefaults()
	d.Model = d.Model.WithDefaults() // classes stays 0 where the mode does not read it
	var errs []error
	for _, path := range explicit {
		l, ok := findLeaf(path)
		if !ok {
			continue
		}
		v, dv := reflect.ValueOf(c).FieldByIndex(l.index), reflect.ValueOf(d).FieldByIndex(l.index)
		if !v.IsZero() && !(v.Kind() == reflect.Slice && v.Len() == 0) || v.Kind() == reflect.Bool {
			continue
		}
		if dv.IsZero() || dv.Kind() == reflect.Slice && dv.Len() == 0 {
			continue // zero is the default: it means what it says
		}
		zero := formatValue(v)
		if v.Kind() == reflect.String {
			zero = "an empty value"
		} else if v.Kind() == reflect.Slice {
			zero = "an empty list"
		}
		msg := fmt.Sprintf("%s would silently mean the default, %s; leave the setting out for the default", zero, formatValue(dv))
		if hint, ok := zeroHints[path]; ok {
			msg += ", or " + hint
		}
		errs = append(errs, fmt.Errorf("%w: %s: %s", ErrConfig, path, msg))
	}
	return errors.Join(errs...)
}

// misindented returns the first line of a YAML text that is indented as
// no key before it is, and how, or 0. The YAML parser reports such a
// line as "did not find expected key" on a line before it (the line
// above, or the start of the block), where nothing is wrong. Lines of
// block lists ("- "), comments, blank lines, and the lines of a block
// scalar ("|" or ">") are passed over; a tab in the indentation is named
// as such.
func misindented(b []byte) (line int, why string) {
	indents := []int{0} // the indentation of each open block
	opens := false      // the line before opens a block
	scalar := -1        // the indentation of a block scalar's key, -1 outside one
	for n, text := range strings.Split(string(b), "\n") {
		body := strings.TrimLeft(text, " ")
		indent := len(text) - len(body)
		trimmed := strings.TrimSpace(body)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		if scalar >= 0 {
			if indent > scalar {
				continue
			}
			scalar = -1
		}
		if strings.HasPrefix(body, "\t") {
			return n + 1, "is indented with a tab: YAML indents with spaces"
		}
		top := indents[len(indents)-1]
		switch {
		case indent > top && opens:
			indents = append(indents, indent)
		case indent > top:
			return n + 1, fmt.Sprintf("is indented by %s, more than the line before it, which opens no block", spaces(indent))
		case indent < top:
			for len(indents) > 1 && indents[len(indents)-1] > indent {
				indents = indents[:len(indents)-1]
			}
			if indents[len(indents)-1] != indent {
				return n + 1, fmt.Sprintf("is indented by %s, as no key above it is", spaces(indent))
			}
		}
		value := strings.TrimSpace(strings.SplitN(trimmed, " #", 2)[0])
		opens = strings.HasSuffix(value, ":") || strings.HasPrefix(value, "- ") || value == "-"
		if strings.HasSuffix(value, "|") || strings.HasSuffix(value, ">") || strings.HasSuffix(value, "|-") || strings.HasSuffix(value, ">-") {
			scalar = indent
		}
	}
	return 0, ""
}

func spaces(n int) string {
	if n == 1 {
		return "1 space"
	}
	return fmt.Sprintf("%d spaces", n)
}
