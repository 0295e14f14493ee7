package service_test

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"denoiser/online"
	"denoiser/service"
)

func validConfig() service.Config {
	return service.Config{
		Kafka:      service.KafkaConfig{Brokers: []string{"127.0.0.1:9092"}, InputTopic: "clicks"},
		Checkpoint: service.CheckpointConfig{Dir: "/tmp/x"},
	}
}

// TestConfigValidateNamesEveryWrongField: a configuration wrong in
// several settings is refused once, with a line for each.
func TestConfigValidateNamesEveryWrongField(t *testing.T) {
	c := validConfig()
	c.Kafka.Brokers, c.Kafka.InputTopic, c.Log.Level, c.Model.Mode = nil, "", "loud", "stars"
	err := c.Validate()
	if !errors.Is(err, service.ErrConfig) {
		t.Fatalf("Validate = %v, want ErrConfig", err)
	}
	lines := strings.Split(err.Error(), "\n")
	for j, want := range []string{"kafka.brokers", "kafka.input_topic", "log.level", "model:"} {
		if j >= len(lines) || !strings.Contains(lines[j], want) {
			t.Errorf("line %d of the refusal does not name %s:\n%v", j+1, want, err)
		}
	}
	if len(lines) != 4 {
		t.Errorf("%d lines, want 4:\n%v", len(lines), err)
	}
}

func TestConfigValidateNamesTheFieldAndTheFix(t *testing.T) {
	if err := validConfig().Validate(); err != nil {
		t.Fatalf("minimal config: %v", err)
	}
	for _, tc := range []struct {
		name  string
		mod   func(*service.Config)
		field string
	}{
		{"no brokers", func(c *service.Config) { c.Kafka.Brokers = nil }, "kafka.brokers"},
		{"no input topic", func(c *service.Config) { c.Kafka.InputTopic = "" }, "kafka.input_topic"},
		{"output is input", func(c *service.Config) { c.Kafka.OutputTopic = "clicks" }, "kafka.output_topic"},
		{"bad start", func(c *service.Config) { c.Kafka.Start = "beginning" }, "kafka.start"},
		{"heartbeat too slow", func(c *service.Config) { c.Kafka.HeartbeatInterval = time.Minute }, "kafka.heartbeat_interval"},
		{"bad acks", func(c *service.Config) { c.Kafka.RequiredAcks = "none" }, "kafka.required_acks"},
		{"bad compression", func(c *service.Config) { c.Kafka.Compression = "brotli" }, "kafka.compression"},
		{"no state dir", func(c *service.Config) { c.Checkpoint.Dir = "" }, "checkpoint.dir"},
		{"negative every", func(c *service.Config) { c.Checkpoint.EveryEvents = -1 }, "checkpoint.every_events"},
		{"bad log level", func(c *service.Config) { c.Log.Level = "loud" }, "log.level"},
		{"short shutdown", func(c *service.Config) { c.ShutdownTimeout = time.Millisecond }, "shutdown_timeout"},
		{"bad model", func(c *service.Config) { c.Model.Mode = "stars" }, "model:"},
		{"changelog without partition state", func(c *service.Config) { c.Checkpoint.ChangelogTopic = "clicks.state" }, "checkpoint.changelog_topic"},
		{"changelog is the output", func(c *service.Config) {
			c.StateLayout, c.Checkpoint.ChangelogTopic = online.LayoutPartition, "clicks.scored"
		}, "checkpoint.changelog_topic"},
		{"sharing without partition state", func(c *service.Config) { c.Sharing.Topic = "clicks.shared" }, "sharing.topic"},
		{"sharing is the changelog", func(c *service.Config) {
			c.StateLayout, c.Sharing.Topic = online.LayoutPartition, service.DefaultGroup+".clicks.state"
		}, "sharing.topic"},
		{"short sharing interval", func(c *service.Config) { c.Sharing.Interval = time.Millisecond }, "sharing.interval"},
		// The fix suggested is a heartbeat the session allows (1s did not).
		{"short session", func(c *service.Config) { c.Kafka.SessionTimeout = time.Second }, "kafka.heartbeat_interval=333ms"},
		{"http addr without a port", func(c *service.Config) { c.HTTP.Addr = "9464" }, "http.addr"},
		{"http port out of range", func(c *service.Config) { c.HTTP.Addr = ":99999" }, "http.addr"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := validConfig()
			tc.mod(&c)
			err := c.Validate()
			if !errors.Is(err, service.ErrConfig) {
				t.Fatalf("Validate = %v, want ErrConfig", err)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("error %q does not name %s", err, tc.field)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("one wrong setting gave more than one error:\n%v", err)
			}
			if field, _, _ := strings.Cut(tc.field, "="); tc.field != "model:" {
				for _, fix := range []string{service.EnvName(field), "--set " + field + "="} {
					if !strings.Contains(err.Error(), fix) {
						t.Errorf("error %q does not say how to set it (%s)", err, fix)
					}
				}
			}
		})
	}
}

// TestChangelogTopicDefault: partition state gets a changelog named after
// the group and the input unless it is turned off; member state has none.
func TestChangelogTopicDefault(t *testing.T) {
	c := validConfig()
	if got := c.WithDefaults().Checkpoint.ChangelogTopic; got != "" {
		t.Errorf("member layout: changelog topic %q, want none", got)
	}
	c.StateLayout = online.LayoutPartition
	if got, want := c.WithDefaults().Checkpoint.ChangelogTopic, service.DefaultGroup+".clicks.state"; got != want {
		t.Errorf("partition layout: changelog topic %q, want %q", got, want)
	}
	c.Checkpoint.ChangelogTopic = service.ChangelogOff
	if err := c.Validate(); err != nil || c.WithDefaults().Checkpoint.ChangelogTopic != service.ChangelogOff {
		t.Errorf("off: %v, %q", err, c.WithDefaults().Checkpoint.ChangelogTopic)
	}
}

func TestSharingTopicDefault(t *testing.T) {
	c := validConfig()
	if got := c.WithDefaults().Sharing.Topic; got != "" {
		t.Errorf("member layout: shared topic %q, want none", got)
	}
	c.StateLayout = online.LayoutPartition
	d := c.WithDefaults()
	if want := service.DefaultGroup + ".clicks.shared"; d.Sharing.Topic != want || d.Sharing.Interval != service.DefaultSharingInterval {
		t.Errorf("partition layout: shared topic %q every %v, want %q every %v", d.Sharing.Topic, d.Sharing.Interval, want, service.DefaultSharingInterval)
	}
	c.Sharing.Topic = service.SharingOff
	if err := c.Validate(); err != nil || c.WithDefaults().Sharing.Topic != service.SharingOff {
		t.Errorf("off: %v, %q", err, c.WithDefaults().Sharing.Topic)
	}
}

func TestConfigEnvAndSet(t *testing.T) {
	paths := service.Paths()
	envs := map[string]bool{}
	for _, p := range paths {
		if envs[service.EnvName(p)] {
			t.Fatalf("two settings share the variable %s", service.EnvName(p))
		}
		envs[service.EnvName(p)] = true
	}
	for _, p := range []string{"kafka.brokers", "checkpoint.interval", "model.dim", "model.dwell_buckets_ms", "shutdown_timeout"} {
		if !slices.Contains(paths, p) {
			t.Errorf("Paths lacks %s", p)
		}
	}

	var c service.Config
	unknown, err := c.ApplyEnv([]string{
		"DENOISER_KAFKA_BROKERS=a:1, b:2", "DENOISER_CHECKPOINT_INTERVAL=3s", "DENOISER_MODEL_DIM=16",
		"DENOISER_MODEL_DWELL_BUCKETS_MS=[5000, 20000]", "DENOISER_CHECKPOINT_NO_SYNC=true", "DENOISER_SEED=9",
		"DENOISER_BOGUS=1", "PATH=/bin",
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(unknown) != 1 || unknown[0] != "DENOISER_BOGUS" {
		t.Errorf("unknown = %v, want [DENOISER_BOGUS]", unknown)
	}
	if strings.Join(c.Kafka.Brokers, "|") != "a:1|b:2" || c.Checkpoint.Interval != 3*time.Second || c.Model.Dim != 16 ||
		!slices.Equal(c.Model.DwellBucketsMS, []int64{5000, 20000}) || !c.Checkpoint.NoSync || c.Seed != 9 {
		t.Errorf("ApplyEnv gave %+v", c)
	}
	if err := c.Set("kafka.batch_timeout", "soon"); !errors.Is(err, service.ErrConfig) || !strings.Contains(err.Error(), "kafka.batch_timeout") {
		t.Errorf("Set of a bad duration = %v", err)
	}
	if err := c.Set("kafka.nope", "1"); !errors.Is(err, service.ErrConfig) {
		t.Errorf("Set of an unknown path = %v", err)
	}
	if _, err := c.ApplyEnv([]string{"DENOISER_BUFFER=many"}); err == nil || !strings.Contains(err.Error(), "DENOISER_BUFFER") {
		t.Errorf("ApplyEnv of a bad number = %v", err)
	}
}

func TestLoadConfigRefusesUnknownKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte("kafka:\n  brokers: [a:1]\n  input_topik: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := service.LoadConfig(path); err == nil || !strings.Contains(err.Error(), "input_topik") {
		t.Fatalf("LoadConfig = %v, want an error naming the unknown key", err)
	}
}

// TestOperationsExample: the example in docs/operations.md sets every
// field, loads and validates.
func TestOperationsExample(t *testing.T) {
	doc, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/operations.md has no yaml block")
	}
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, m[1], 0o644); err != nil {
		t.Fatal(err)
	}
	c, _, err := service.Layers{File: path}.Load()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("the example does not validate: %v", err)
	}
	have := map[string]bool{}
	settingsIn(t, m[1], have)
	for _, p := range service.Paths() {
		if !have[p] {
			t.Errorf("the example does not set %s", p)
		}
	}
}

// TestReadmeConfiguration: the README's YAML blocks (the service's
// settings, then the seed and model defaults) name every setting there is,
// and each block loads.
func TestReadmeConfiguration(t *testing.T) {
	doc, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, m := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllSubmatch(doc, -1) {
		path := filepath.Join(t.TempDir(), "c.yaml")
		if err := os.WriteFile(path, m[1], 0o644); err != nil {
			t.Fatal(err)
		}
		// Loaded as replay and run load it: CheckClasses is what both add
		// to the file's own checks (the defaults block once set classes: 5
		// beside mode: binary, which both refused).
		c, _, err := (service.Layers{File: path}).Load()
		if err == nil {
			err = service.CheckClasses(c.Model)
		}
		if err != nil {
			t.Errorf("a README block does not load: %v\n%s", err, m[1])
		}
		settingsIn(t, m[1], have)
	}
	for _, p := range service.Paths() {
		if !have[p] {
			t.Errorf("the README's configuration does not show %s", p)
		}
	}
}

// settingsIn adds to have the setting paths ("kafka.brokers") a YAML
// document sets.
func settingsIn(t *testing.T, doc []byte, have map[string]bool) {
	t.Helper()
	var tree map[string]any
	if err := yaml.Unmarshal(doc, &tree); err != nil {
		t.Fatal(err)
	}
	var flatten func(prefix string, v any)
	flatten = func(prefix string, v any) {
		if mm, ok := v.(map[string]any); ok {
			for k, v := range mm {
				if prefix != "" {
					k = prefix + "." + k
				}
				flatten(k, v)
			}
			return
		}
		have[prefix] = true
	}
	flatten("", tree)
}

// TestUserOffsetOnByDefault: the layers start from BaseConfig, so
// model.transition_user_offset is on with no file and with a file that
// does not name it, and each layer can turn it off; --print-config says so.
func TestUserOffsetOnByDefault(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	silent := write("silent.yaml", "model:\n  dim: 16\n")
	off := write("off.yaml", "model:\n  transition_user_offset: false\n")
	for _, tc := range []struct {
		name string
		l    service.Layers
		want bool
	}{
		{"no file", service.Layers{}, true},
		{"a file that does not name it", service.Layers{File: silent}, true},
		{"the file turns it off", service.Layers{File: off}, false},
		{"the environment turns it off", service.Layers{Environ: []string{"DENOISER_MODEL_TRANSITION_USER_OFFSET=false"}}, false},
		{"--set turns it off", service.Layers{Sets: []string{"model.transition_user_offset=false"}}, false},
		{"--set turns it on over the file", service.Layers{File: off, Sets: []string{"model.transition_user_offset=true"}}, true},
	} {
		c, _, err := tc.l.Load()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if c.Model.TransitionUserOffset != tc.want {
			t.Errorf("%s: transition_user_offset %v, want %v", tc.name, c.Model.TransitionUserOffset, tc.want)
		}
		y, err := c.EffectiveYAML()
		if err != nil {
			t.Fatal(err)
		}
		if line := "transition_user_offset: " + map[bool]string{true: "true", false: "false"}[tc.want]; !strings.Contains(string(y), line) {
			t.Errorf("%s: the effective configuration lacks %q", tc.name, line)
		}
	}
	if c, err := service.LoadConfig(""); err != nil || !c.Model.TransitionUserOffset {
		t.Errorf("LoadConfig(\"\") = %v, %v: want the offset on", c.Model.TransitionUserOffset, err)
	}
}

// TestDwellDirectionLongByDefault: model.dwell_direction is long unless a
// layer says learned, and a value that is neither is refused, naming the
// setting.
func TestDwellDirectionLongByDefault(t *testing.T) {
	dir := t.TempDir()
	learned := filepath.Join(dir, "learned.yaml")
	if err := os.WriteFile(learned, []byte("model:\n  dwell_direction: learned\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		l    service.Layers
		want string
	}{
		{"no file", service.Layers{}, online.DwellLong},
		{"the file says learned", service.Layers{File: learned}, online.DwellLearned},
		{"the environment says learned", service.Layers{Environ: []string{"DENOISER_MODEL_DWELL_DIRECTION=learned"}}, online.DwellLearned},
		{"--set says long over the file", service.Layers{File: learned, Sets: []string{"model.dwell_direction=long"}}, online.DwellLong},
	} {
		c, _, err := tc.l.Load()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if c.Model.DwellDirection != tc.want {
			t.Errorf("%s: dwell_direction %q, want %q", tc.name, c.Model.DwellDirection, tc.want)
		}
	}
	c, _, err := service.Layers{Sets: []string{"model.dwell_direction=short"}}.Load()
	if err == nil {
		err = c.Model.Validate()
	}
	if err == nil || !strings.Contains(err.Error(), "dwell_direction") {
		t.Errorf("dwell_direction short: %v, want an error naming the setting", err)
	}
}

// TestConfigHTTPAddrAccepted: the listen addresses a deployment uses pass
// the check that http.addr is host:port.
func TestConfigHTTPAddrAccepted(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:9464", ":9464", "0.0.0.0:0", "[::1]:9464", "localhost:65535", service.HTTPOff} {
		c := validConfig()
		c.HTTP.Addr = addr
		if err := c.Validate(); err != nil {
			t.Errorf("http.addr %q: %v", addr, err)
		}
	}
}
