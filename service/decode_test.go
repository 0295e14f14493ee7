package service_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"denoiser/service"
)

func loadYAML(t *testing.T, text string) (service.Config, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := service.Layers{File: path}.Load()
	return cfg, err
}

// TestConfigErrorsNameTheFieldAndTheFix: a wrong value in the file, a
// variable or --set says which setting, what kind of value it wants and
// an example, never a Go type.
func TestConfigErrorsNameTheFieldAndTheFix(t *testing.T) {
	for _, tc := range []struct {
		name   string
		yaml   string
		layers service.Layers
		want   []string
	}{
		{"duration without unit", "kafka:\n  session_timeout: 10\n", service.Layers{},
			[]string{"line 2: kafka.session_timeout: 10 has no unit; write a duration such as 10s"}},
		{"word for an integer", "model:\n  dim: big\n", service.Layers{},
			[]string{`line 2: model.dim: "big" is not a number; an integer is wanted, such as 32`}},
		{"misspelt key", "model:\n  dimm: 8\n", service.Layers{}, []string{"line 2: model.dimm: unknown setting (did you mean dim?)"}},
		{"unknown key, nothing near", "kafka:\n  zookeeper: x\n", service.Layers{},
			[]string{"kafka.zookeeper: unknown setting (the settings in kafka: brokers, input_topic"}},
		{"unknown section", "kafak:\n  brokers: x\n", service.Layers{}, []string{"kafak: unknown setting (did you mean kafka?)"}},
		{"float for an integer", "model:\n  dim: 3.5\n", service.Layers{}, []string{"model.dim: 3.5 is not a whole number; an integer is wanted"}},
		{"float for an integer, --set", "", service.Layers{Sets: []string{"model.dim=3.5"}}, []string{"model.dim: 3.5 is not a whole number"}},
		{"float for an integer, variable", "", service.Layers{Environ: []string{"DENOISER_MODEL_DIM=3.5"}},
			[]string{"environment DENOISER_MODEL_DIM", "model.dim: 3.5 is not a whole number"}},
		{"negative seed", "seed: -1\n", service.Layers{}, []string{"seed: -1 is negative"}},
		{"list for a value", "model:\n  dim: [1, 2]\n", service.Layers{}, []string{"model.dim: a single value is wanted, such as 32"}},
		{"every wrong line", "kafka:\n  batch_size: x\n  retry_for: 5\n", service.Layers{}, []string{"line 2: kafka.batch_size", "line 3: kafka.retry_for"}},
		{"set twice", "seed: 3\nseed: 4\n", service.Layers{}, []string{"line 2: seed: set twice (first on line 1)"}},
		{"unknown --set", "", service.Layers{Sets: []string{"model.dimm=3"}}, []string{`model.dimm: unknown setting (did you mean dim?)`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := tc.layers
			if tc.yaml != "" {
				l.File = filepath.Join(t.TempDir(), "c.yaml")
				if err := os.WriteFile(l.File, []byte(tc.yaml), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			_, _, err := l.Load()
			if !errors.Is(err, service.ErrConfig) {
				t.Fatalf("Load = %v, want ErrConfig", err)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
			for _, goType := range []string{"time.Duration", "online.Config", "into int", "uint64", "!!"} {
				if strings.Contains(err.Error(), goType) {
					t.Errorf("error %q names a Go or YAML type (%s)", err, goType)
				}
			}
		})
	}
}

// TestConfigBrokersAsString: brokers takes a string, as --brokers does.
func TestConfigBrokersAsString(t *testing.T) {
	for yaml, want := range map[string][]string{
		"kafka:\n  brokers: kafka:9092\n":                  {"kafka:9092"},
		"kafka:\n  brokers: \"a:9092,b:9092\"\n":           {"a:9092", "b:9092"},
		"kafka:\n  brokers: [a:9092, b:9092]\n":            {"a:9092", "b:9092"},
		"kafka:\n  brokers:\n    - a:9092\n    - b:9092\n": {"a:9092", "b:9092"},
	} {
		cfg, err := loadYAML(t, yaml)
		if err != nil || !slices.Equal(cfg.Kafka.Brokers, want) {
			t.Errorf("%q: brokers %q, %v; want %q", yaml, cfg.Kafka.Brokers, err, want)
		}
	}
}

// TestConfigExplicitZeroThatMeansDefault: a zero written out that would
// silently mean a non-zero default is refused; a zero that is the default
// is taken.
func TestConfigExplicitZeroThatMeansDefault(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"seed: 0\n", "seed: 0 would silently mean the default, 1"},
		{"kafka:\n  retry_for: 0s\n", "kafka.retry_for: 0s would silently mean the default, 1m"},
		{"kafka:\n  batch_timeout: 0s\n", "kafka.batch_timeout: 0s would silently mean the default, 10ms"},
		{"model:\n  dim: 0\n", "model.dim: 0 would silently mean the default, 32"},
		{"model:\n  warm_up: 0\n", "model.warm_up: 0 would silently mean the default, 1000"},
		{"kafka:\n  group: \"\"\n", "kafka.group: an empty value would silently mean the default, denoiser"},
		{"model:\n  mode: dwell\n  dwell_buckets_ms: []\n", "model.dwell_buckets_ms: an empty list would silently mean the default"},
	} {
		_, err := loadYAML(t, tc.yaml)
		if !errors.Is(err, service.ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v; want an error with %q", tc.yaml, err, tc.want)
		}
	}
	if _, _, err := (service.Layers{Sets: []string{"model.dim=0"}}).Load(); err == nil {
		t.Error("--set model.dim=0 accepted")
	}
	// Zeros that are the default mean what they say.
	for _, yaml := range []string{"model:\n  negatives: 0\n  mode: rating\n", "model:\n  dwell_buckets_ms: []\n", "checkpoint:\n  no_sync: false\n"} {
		if _, err := loadYAML(t, yaml); err != nil {
			t.Errorf("%q: %v", yaml, err)
		}
	}
}

// TestEffectiveYAMLShowsTheModelsClasses: --print-config shows the number
// of classes the mode implies, and the printed file loads and validates.
func TestEffectiveYAMLShowsTheModelsClasses(t *testing.T) {
	for mode, want := range map[string]string{"binary": "classes: 2", "rating": "classes: 5", "dwell": "classes: 3"} {
		c := validConfig()
		c.Model.Mode = mode
		b, err := c.EffectiveYAML()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), want) {
			t.Errorf("%s mode: effective config lacks %q:\n%s", mode, want, b)
		}
		back, err := loadYAML(t, string(b))
		if err != nil {
			t.Fatalf("%s mode: the printed config does not load: %v", mode, err)
		}
		if err := back.Validate(); err != nil {
			t.Fatalf("%s mode: the printed config does not validate: %v", mode, err)
		}
	}
	// The settings whose defaults follow the mode say so, so that a file
	// printed in binary mode and edited to rating mode is not read with
	// binary mode's 2 classes by surprise.
	b, err := validConfig().EffectiveYAML()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"classes: 2 # follows mode", "embedding_rate: 0.3 # mode's default", "negatives: 4 # mode's default"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the printed config lacks %q", want)
		}
	}
	c := validConfig()
	c.Model.Classes = 7
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "model.classes") {
		t.Errorf("classes 7 in binary mode: %v", err)
	}
}
