package cli

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"denoiser/service"
)

// CheckSets refuses, before the configuration is loaded, the --set
// overrides that service.Layers would refuse with a less helpful
// message: one without "=", and one that names a section ("model",
// "kafka") rather than a setting, for which it lists the --set of each
// setting the value names (--set 'model={dim: 8}': --set model.dim=8).
// Every wrong one is reported; the errors wrap service.ErrConfig.
func CheckSets(sets []string) error {
	var errs []error
	for _, s := range sets {
		path, value, ok := strings.Cut(s, "=")
		if !ok {
			errs = append(errs, fmt.Errorf("%w: --set %q: want PATH=VALUE, e.g. --set model.dim=16", service.ErrConfig, s))
			continue
		}
		keys := sectionKeys(path)
		if len(keys) == 0 {
			continue
		}
		errs = append(errs, fmt.Errorf("%w: --set %s: %s is a section, not a setting: %s", service.ErrConfig, s, path, setsFor(path, value, keys)))
	}
	return errors.Join(errs...)
}

// sectionKeys lists the keys directly under path when it names a section
// of the configuration, nil when it does not.
func sectionKeys(path string) []string {
	var keys []string
	for _, p := range service.Paths() {
		if rest, ok := strings.CutPrefix(p, path+"."); ok {
			key, _, _ := strings.Cut(rest, ".")
			if !slices.Contains(keys, key) {
				keys = append(keys, key)
			}
		}
	}
	return keys
}

// setsFor says how to set what value, given for the section path whose
// keys are keys, sets: one --set per setting it names, when it is a YAML
// mapping of scalars under keys, else the form and the keys.
func setsFor(path, value string, keys []string) string {
	var m yaml.Node
	if yaml.Unmarshal([]byte(value), &m) == nil && len(m.Content) == 1 && m.Content[0].Kind == yaml.MappingNode && len(m.Content[0].Content) > 0 {
		var sets []string
		c := m.Content[0].Content
		for i := 0; i+1 < len(c); i += 2 {
			k, v := c[i], c[i+1]
			if v.Kind != yaml.ScalarNode || !slices.Contains(keys, k.Value) {
				sets = nil
				break
			}
			sets = append(sets, "--set "+path+"."+k.Value+"="+v.Value)
		}
		if len(sets) > 0 {
			return "give one --set per setting, " + strings.Join(sets, " ")
		}
	}
	return "give one --set per setting, --set " + path + ".KEY=VALUE (the keys of " + path + ": " + strings.Join(keys, ", ") + ")"
}

// UnknownEnv says that the DENOISER_* variables names name no setting,
// with the variable each most likely means where one is near
// (DENOISER_MODEL_DIMM: did you mean DENOISER_MODEL_DIM?).
func UnknownEnv(names []string) string {
	var parts []string
	for _, name := range names {
		if near := NearestEnv(name); near != "" {
			parts = append(parts, name+" (did you mean "+near+"?)")
		} else {
			parts = append(parts, name)
		}
	}
	verb := "names"
	if len(names) > 1 {
		verb = "name"
	}
	return strings.Join(parts, ", ") + " " + verb + " no setting; a setting a.b_c is " + service.EnvPrefix + "A_B_C (model.dim: " + service.EnvName("model.dim") + ")"
}

// NearestEnv is the variable of a setting that name, a DENOISER_*
// variable that names none, most likely means ("" if none is near): the
// nearest by edit distance, within a third of its length.
func NearestEnv(name string) string {
	rest := strings.TrimPrefix(name, service.EnvPrefix)
	best, bestDist := "", len(rest)/3+1
	for _, p := range service.Paths() {
		env := service.EnvName(p)
		if d := editDistance(rest, strings.TrimPrefix(env, service.EnvPrefix)); d < bestDist {
			best, bestDist = env, d
		}
	}
	return best
}

// editDistance is the edit distance of a and b, counting a swap of two
// neighbouring letters as one edit (optimal string alignment), as the
// configuration's own did-you-mean counts (service).
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
