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
		keys := service.SectionKeys(path)
		if len(keys) == 0 {
			continue
		}
		errs = append(errs, fmt.Errorf("%w: --set %s: %s is a section, not a setting: %s", service.ErrConfig, s, path, setsFor(path, value, keys)))
	}
	return errors.Join(errs...)
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
		if near := service.NearestEnv(name); near != "" {
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
