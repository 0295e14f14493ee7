package service_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"denoiser/service"
)

// TestLayersPrecedence: the file, then DENOISER_* variables, then flags,
// then --set, each over the ones before it; variables that name no setting
// are returned, others ignored.
func TestLayersPrecedence(t *testing.T) {
	file := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(file, []byte("kafka:\n  input_topic: from-file\n  group: file-group\n  batch_size: 3\nmodel:\n  dim: 8\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, unknown, err := service.Layers{
		File: file,
		Environ: []string{"DENOISER_KAFKA_GROUP=env-group", "DENOISER_CHECKPOINT_INTERVAL=3s",
			"DENOISER_KAFKA_BATCH_SIZE=5", "DENOISER_NOPE=1", "HOME=/root"},
		Flags: map[string]string{"kafka.group": "flag-group", "kafka.batch_size": "6"},
		Sets:  []string{"kafka.batch_size=7", "kafka.brokers=a:1,b:2"},
	}.Load()
	if err != nil {
		t.Fatal(err)
	}
	k := cfg.Kafka
	if k.InputTopic != "from-file" || k.Group != "flag-group" || k.BatchSize != 7 ||
		cfg.Checkpoint.Interval != 3*time.Second || cfg.Model.Dim != 8 || strings.Join(k.Brokers, " ") != "a:1 b:2" {
		t.Fatalf("layered config: %+v", cfg)
	}
	if strings.Join(unknown, " ") != "DENOISER_NOPE" {
		t.Fatalf("unknown variables %q, want DENOISER_NOPE", unknown)
	}
	if k.OutputTopic != "" {
		t.Fatalf("Load applied defaults: output topic %q", k.OutputTopic)
	}

	b, err := cfg.EffectiveYAML()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"input_topic: from-file", "group: flag-group", "interval: 3s", "batch_size: 7", "dim: 8", "output_topic: from-file.scored"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("effective config lacks %q:\n%s", want, b)
		}
	}
}

func TestLayersErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		layers service.Layers
		want   []string
		config bool // wraps ErrConfig
	}{
		{"unknown set", service.Layers{Sets: []string{"kafka.nope=1"}}, []string{`kafka.nope: unknown setting`}, true},
		{"set without value", service.Layers{Sets: []string{"kafka.group"}}, []string{"want PATH=VALUE"}, false},
		{"bad duration", service.Layers{Sets: []string{"kafka.batch_timeout=fast"}}, []string{"kafka.batch_timeout"}, true},
		{"bad flag and bad set", service.Layers{Flags: map[string]string{"kafka.batch_size": "many"}, Sets: []string{"checkpoint.interval=soon"}},
			[]string{"kafka.batch_size", "checkpoint.interval"}, true},
		{"bad variable", service.Layers{Environ: []string{"DENOISER_BUFFER=lots"}}, []string{"environment DENOISER_BUFFER"}, true},
		{"missing file", service.Layers{File: "/nonexistent/denoiser.yaml"}, []string{"read config"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := tc.layers.Load()
			if err == nil {
				t.Fatal("Load succeeded")
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
			if tc.config && !errors.Is(err, service.ErrConfig) {
				t.Errorf("error %q does not wrap ErrConfig", err)
			}
		})
	}
}

func TestNewLogger(t *testing.T) {
	var buf bytes.Buffer
	log := service.NewLogger(service.LogConfig{Level: "warn", Format: "json"}, &buf)
	log.Info("hidden")
	log.Warn("shown")
	if s := buf.String(); strings.Contains(s, "hidden") || !strings.HasPrefix(s, `{"time":`) || !strings.Contains(s, `"msg":"shown"`) {
		t.Fatalf("warn/json logger wrote %q", s)
	}
	buf.Reset()
	service.NewLogger(service.LogConfig{}, &buf).Debug("hidden")
	service.NewLogger(service.LogConfig{}, &buf).Info("shown")
	if s := buf.String(); strings.Contains(s, "hidden") || !strings.Contains(s, "level=INFO msg=shown") {
		t.Fatalf("default logger wrote %q", s)
	}
}
