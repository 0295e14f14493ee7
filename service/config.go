package service

import (
	"errors"
	"fmt"
	"net"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"denoiser/consumer"
	"denoiser/online"
	"denoiser/producer"
	"denoiser/state"
)

// Config is the configuration of `denoiser run`: a YAML file (see
// docs/operations.md for a complete example), then DENOISER_* environment
// variables, then flags. The zero value of every field means the default
// written in its comment; Layers.Load refuses a zero written out in the
// file, a variable or a flag where the default is not zero, since it
// would silently mean that default.
type Config struct {
	Kafka      KafkaConfig      `yaml:"kafka"`
	Checkpoint CheckpointConfig `yaml:"checkpoint"`
	Sharing    SharingConfig    `yaml:"sharing"`
	HTTP       HTTPConfig       `yaml:"http"`
	Log        LogConfig        `yaml:"log"`
	// ShutdownTimeout bounds a graceful stop (SIGTERM, SIGINT): stop
	// fetching, drain, checkpoint, commit, close (default 10s).
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// Buffer bounds the records in flight between the reader, the model
	// and the writer: at most 2·Buffer+2 (default 256; consumer.Options).
	Buffer int `yaml:"buffer"`
	// Seed seeds the model's random source when it starts from nothing
	// (default 1). A restored model keeps its own random state.
	Seed uint64 `yaml:"seed"`
	// StateLayout says how the member's state is split (default
	// "member"): "member" keeps one model for every partition the member
	// reads; "partition" keeps a model per input partition, which learns
	// from that partition's events only and draws from its own random
	// source, so that its scores depend on that partition's input alone,
	// whichever member reads it and whatever else it reads, and the
	// partitions step on separate goroutines. The models share their item
	// rows (Sharing), but each fits its networks and mixture on its share
	// of the stream, and scores lower (the demo's weight: 0.864 with 3
	// partitions against 0.925; docs/design/partitions.md). A restored state
	// keeps its layout; one model per member can be turned into one per
	// partition (every partition starts from it), not back.
	StateLayout online.Layout `yaml:"state_layout"`
	// Fields names the members of the input's records that the fields
	// are read from, for a producer that names them otherwise (fields.ts:
	// timestamp); empty: the event format's names (consumer.Fields).
	Fields consumer.Fields `yaml:"fields"`
	// Model configures a model that starts from nothing; see online.Config.
	// A model restored from the checkpoint keeps the configuration it was
	// created with.
	Model online.Config `yaml:"model"`
}

// KafkaConfig is the input, output and group configuration. It embeds the
// source's and the writers' own configurations, inline: their settings sit
// directly under "kafka" (kafka.fetch_max_bytes, kafka.batch_size, ...),
// and their defaults are the ones written, once, in consumer.KafkaConfig
// and producer.KafkaConfig. New sets the brokers, topics, group, positions
// and loggers of both from the fields declared here.
type KafkaConfig struct {
	// Brokers are the bootstrap addresses, host:port (required).
	Brokers []string `yaml:"brokers"`
	// InputTopic is the topic of raw events (required).
	InputTopic string `yaml:"input_topic"`
	// Group is the consumer group id (default "denoiser").
	Group string `yaml:"group"`
	// OutputTopic receives scored events (default InputTopic + ".scored").
	OutputTopic string `yaml:"output_topic"`
	// DeadLetterTopic receives bad records (default InputTopic +
	// ".dead-letter").
	DeadLetterTopic string `yaml:"dead_letter_topic"`

	// SourceConfig holds the input's settings: start, fetch_max_bytes,
	// fetch_max_wait, fetch_buffer, session_timeout, heartbeat_interval,
	// rebalance_timeout, request_timeout.
	SourceConfig `yaml:",inline"`
	// WriterConfig holds the settings of the output and dead-letter
	// writers: batch_size, batch_timeout, max_batches, retry_for,
	// required_acks, compression, write_timeout.
	WriterConfig `yaml:",inline"`
}

// SourceConfig and WriterConfig name the configurations KafkaConfig
// embeds (both packages call theirs KafkaConfig).
type (
	SourceConfig = consumer.KafkaConfig
	WriterConfig = producer.KafkaConfig
)

// CheckpointConfig configures the Badger state.
type CheckpointConfig struct {
	// Dir is the Badger directory holding the model and the input
	// positions (required). One running instance per directory.
	Dir string `yaml:"dir"`
	// EveryEvents: a checkpoint after this many records (default 50000).
	EveryEvents int `yaml:"every_events"`
	// Interval: a checkpoint at least this often while records arrive
	// (default 10s).
	Interval time.Duration `yaml:"interval"`
	// NoSync skips the fsync of each checkpoint (default false).
	NoSync bool `yaml:"no_sync"`
	// GCInterval is the period of Badger's garbage collection (default 1m).
	GCInterval time.Duration `yaml:"gc_interval"`
	// ChangelogTopic is the compacted Kafka topic that holds each input
	// partition's checkpoints, from which any member restores a partition
	// it is assigned (docs/design/changelog.md). With state_layout
	// partition the default is "<group>.<input_topic>.state", created if
	// absent; "off" keeps partition state local (a partition that moves
	// to another member starts there from what that member has). With
	// state_layout member there is none: state is not per partition.
	ChangelogTopic string `yaml:"changelog_topic"`
}

// SharingConfig configures how the partition models of state_layout
// partition learn the shared parameters together (docs/design/
// partitions.md): every Interval each publishes what its steps changed in
// the item rows, and what its events added to the context's statistics,
// to the shared topic, and merges what the other partitions' models
// published, whichever member runs them.
type SharingConfig struct {
	// Topic is the shared topic. With state_layout partition the default
	// is "<group>.<input_topic>.shared", created if absent with one
	// partition and time-based retention; "off": each partition's model
	// learns from its partition's events alone. With state_layout member
	// there is none: one model learns from every partition it reads.
	Topic string `yaml:"topic"`
	// Interval is how often the models publish (default 5s), and at
	// every checkpoint: it bounds how stale the item rows of one
	// partition's model are with respect to the others'. A model merges
	// what was read back at the end of each batch it stepped in.
	Interval time.Duration `yaml:"interval"`
	// EveryEvents: the models also publish after this many records of
	// the member (default 1000), so that a backlog read at
	// full speed is not learned by each partition alone for Interval.
	EveryEvents int `yaml:"every_events"`
	// Wait: after each publication the member waits, for at most this
	// long (default 250ms), until the shared topic hands its publication
	// back, and merges what every member published before it, before its
	// models step on; a negative value (-1s) never waits. In a backlog
	// this bounds what a partition model misses of the others' learning
	// to one publication (without it, also a round trip through the
	// brokers: thousands of records), at the cost of a round trip per
	// publication (docs/design/partitions.md, "Built: publications read
	// back before stepping on"). A wait that expires is not repeated
	// until the topic hands something of the member's back.
	Wait time.Duration `yaml:"wait"`
	// Retention is the retention.ms of a shared topic the service
	// creates (default 1h): a member that restores a partition's model
	// merges the deltas published since its checkpoint, if the topic
	// still holds them.
	Retention time.Duration `yaml:"retention"`
}

// HTTPConfig configures the HTTP server of /metrics, /healthz, /readyz
// and /snapshot.
type HTTPConfig struct {
	// Addr is the listen address (default "127.0.0.1:9464"; ":9464" for
	// every interface; "off" for no server).
	Addr string `yaml:"addr"`
	// SnapshotDir is the directory of the live snapshots /snapshot
	// writes (POST) and serves (GET); empty (the default): /snapshot
	// answers that none is configured.
	SnapshotDir string `yaml:"snapshot_dir"`
}

// LogConfig configures the log.
type LogConfig struct {
	// Level is "debug", "info" (default), "warn" or "error".
	Level string `yaml:"level"`
	// Format is "text" (default) or "json".
	Format string `yaml:"format"`
}

// Defaults.
const (
	DefaultGroup           = "denoiser"
	DefaultHTTPAddr        = "127.0.0.1:9464"
	DefaultShutdownTimeout = 10 * time.Second
	DefaultEveryEvents     = 50000
	DefaultInterval        = 10 * time.Second
	HTTPOff                = "off"
	// ChangelogOff as checkpoint.changelog_topic keeps partition state local.
	ChangelogOff = "off"
	// SharingOff as sharing.topic: partition models do not share.
	SharingOff = "off"
	// DefaultSharingInterval is sharing.interval's default.
	DefaultSharingInterval = 5 * time.Second
	// DefaultSharingEvents is sharing.every_events' default.
	DefaultSharingEvents = 1000
	// DefaultSharingWait is sharing.wait's default.
	DefaultSharingWait = 250 * time.Millisecond
)

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	k := &c.Kafka
	setDefault(&k.Group, DefaultGroup)
	if k.OutputTopic == "" && k.InputTopic != "" {
		k.OutputTopic = k.InputTopic + ".scored"
	}
	if k.DeadLetterTopic == "" && k.InputTopic != "" {
		k.DeadLetterTopic = k.InputTopic + ".dead-letter"
	}
	k.SourceConfig = k.SourceConfig.WithDefaults()
	k.WriterConfig = k.WriterConfig.WithDefaults()
	c.Fields = c.Fields.WithDefaults()
	setDefault(&c.Checkpoint.EveryEvents, DefaultEveryEvents)
	setDefault(&c.Checkpoint.Interval, DefaultInterval)
	setDefault(&c.Checkpoint.GCInterval, time.Minute)
	setDefault(&c.HTTP.Addr, DefaultHTTPAddr)
	setDefault(&c.Log.Level, "info")
	setDefault(&c.Log.Format, "text")
	setDefault(&c.ShutdownTimeout, DefaultShutdownTimeout)
	setDefault(&c.Buffer, 256)
	setDefault(&c.Seed, 1)
	setDefault(&c.StateLayout, online.LayoutMember)
	if c.StateLayout == online.LayoutPartition && k.InputTopic != "" {
		setDefault(&c.Checkpoint.ChangelogTopic, k.Group+"."+k.InputTopic+".state")
		setDefault(&c.Sharing.Topic, k.Group+"."+k.InputTopic+".shared")
	}
	setDefault(&c.Sharing.Interval, DefaultSharingInterval)
	setDefault(&c.Sharing.EveryEvents, DefaultSharingEvents)
	setDefault(&c.Sharing.Wait, DefaultSharingWait)
	setDefault(&c.Sharing.Retention, state.DefaultSharedRetention)
	return c
}

func setDefault[T comparable](p *T, v T) {
	var zero T
	if *p == zero {
		*p = v
	}
}

// ErrConfig marks a configuration error; its message names the field and
// how to set it.
var ErrConfig = errors.New("configuration")

// fieldError names a field, what is wrong and how to fix it.
func fieldError(path, problem, example string) error {
	return fmt.Errorf("%w: %s: %s; set it in the config file, as %s or with --set %s=%s",
		ErrConfig, path, problem, EnvName(path), path, example)
}

// validListenAddr reports whether addr is host:port (the host may be
// empty: every interface) with a port number net.Listen takes.
func validListenAddr(addr string) bool {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	n, err := strconv.ParseUint(port, 10, 16)
	return err == nil && n <= 65535
}

// Validate checks c (with defaults applied) and returns an error naming
// every wrong field and how to fix it, one line each (errors.Join): a
// new configuration is fixed in one round, not one setting a run.
func (c Config) Validate() error {
	c = c.WithDefaults()
	k := c.Kafka
	var errs []error
	if len(k.Brokers) == 0 {
		errs = append(errs, fieldError("kafka.brokers", "required (host:port of at least one broker)", "127.0.0.1:9092"))
	}
	if slices.Contains(k.Brokers, "") {
		errs = append(errs, fieldError("kafka.brokers", "contains an empty address", "127.0.0.1:9092"))
	}
	if k.InputTopic == "" {
		errs = append(errs, fieldError("kafka.input_topic", "required", "clicks"))
	}
	if k.InputTopic != "" && (k.OutputTopic == k.InputTopic || k.DeadLetterTopic == k.InputTopic) {
		errs = append(errs, fieldError("kafka.output_topic", "the output and dead-letter topics must differ from the input topic", k.InputTopic+".scored"))
	}
	if k.InputTopic != "" && k.OutputTopic == k.DeadLetterTopic {
		errs = append(errs, fieldError("kafka.dead_letter_topic", "must differ from the output topic", k.InputTopic+".dead-letter"))
	}
	if k.Start != consumer.StartEarliest && k.Start != consumer.StartLatest {
		errs = append(errs, fieldError("kafka.start", fmt.Sprintf("%q is not earliest or latest", k.Start), "earliest"))
	}
	if k.FetchMaxBytes < 1024 {
		errs = append(errs, fieldError("kafka.fetch_max_bytes", "must be at least 1024", "1048576"))
	}
	if k.Buffer < 1 {
		errs = append(errs, fieldError("kafka.fetch_buffer", "must be at least 1", "1024"))
	}
	if k.FetchMaxWait < 0 || k.FetchMaxWait > time.Minute {
		errs = append(errs, fieldError("kafka.fetch_max_wait", "must be in [0, 1m]", "250ms"))
	}
	if k.SessionTimeout < time.Second {
		errs = append(errs, fieldError("kafka.session_timeout", "must be at least 1s", "10s"))
	}
	if k.HeartbeatInterval <= 0 {
		errs = append(errs, fieldError("kafka.heartbeat_interval", "must be positive", "1s"))
	} else if k.HeartbeatInterval >= k.SessionTimeout {
		// Kafka's consumers default to a third of the session timeout
		// (heartbeat.interval.ms 3 s against session.timeout.ms 45 s).
		errs = append(errs, fieldError("kafka.heartbeat_interval", fmt.Sprintf("%s is not shorter than kafka.session_timeout %s; a third of it or less is usual", k.HeartbeatInterval, k.SessionTimeout),
			(k.SessionTimeout/3).Round(time.Millisecond).String()))
	}
	if k.RebalanceTimeout < time.Second {
		errs = append(errs, fieldError("kafka.rebalance_timeout", "must be at least 1s", "10s"))
	}
	if k.StartupTimeout < 0 {
		errs = append(errs, fieldError("kafka.startup_timeout", "must not be negative (0s: keep trying)", "2m"))
	}
	if k.RequestTimeout < 100*time.Millisecond {
		errs = append(errs, fieldError("kafka.request_timeout", "must be at least 100ms", "5s"))
	}
	if k.BatchSize < 1 {
		errs = append(errs, fieldError("kafka.batch_size", "must be at least 1", "1000"))
	}
	if k.BatchTimeout < 0 {
		errs = append(errs, fieldError("kafka.batch_timeout", "must not be negative", "10ms"))
	}
	if k.MaxBatches < 1 {
		errs = append(errs, fieldError("kafka.max_batches", "must be at least 1", "4"))
	}
	if k.RetryFor < 0 {
		errs = append(errs, fieldError("kafka.retry_for", "must not be negative", "1m"))
	}
	if k.RequiredAcks != "all" && k.RequiredAcks != "leader" {
		errs = append(errs, fieldError("kafka.required_acks", fmt.Sprintf("%q is not all or leader", k.RequiredAcks), "all"))
	}
	if k.WriteTimeout < 100*time.Millisecond {
		errs = append(errs, fieldError("kafka.write_timeout", "must be at least 100ms", "10s"))
	}
	if c.HTTP.Addr != HTTPOff && !validListenAddr(c.HTTP.Addr) {
		errs = append(errs, fieldError("http.addr", fmt.Sprintf("%q is not host:port with a port in 0..65535 (%q turns the endpoint off)", c.HTTP.Addr, HTTPOff), DefaultHTTPAddr))
	}
	if c.Checkpoint.Dir == "" {
		errs = append(errs, fieldError("checkpoint.dir", "required (a directory for the Badger state)", "/var/lib/denoiser"))
	}
	if c.Checkpoint.EveryEvents < 1 {
		errs = append(errs, fieldError("checkpoint.every_events", "must be at least 1", "50000"))
	}
	if c.Checkpoint.Interval < 10*time.Millisecond {
		errs = append(errs, fieldError("checkpoint.interval", "must be at least 10ms", "10s"))
	}
	if c.Checkpoint.GCInterval < 0 {
		errs = append(errs, fieldError("checkpoint.gc_interval", "must not be negative", "1m"))
	}
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, c.Log.Level) {
		errs = append(errs, fieldError("log.level", fmt.Sprintf("%q is not debug, info, warn or error", c.Log.Level), "info"))
	}
	if c.Log.Format != "text" && c.Log.Format != "json" {
		errs = append(errs, fieldError("log.format", fmt.Sprintf("%q is not text or json", c.Log.Format), "json"))
	}
	if c.ShutdownTimeout < time.Second {
		errs = append(errs, fieldError("shutdown_timeout", "must be at least 1s", "10s"))
	}
	if c.Buffer < 1 {
		errs = append(errs, fieldError("buffer", "must be at least 1", "256"))
	}
	if c.StateLayout.Validate() != nil {
		errs = append(errs, fieldError("state_layout", fmt.Sprintf("%q is not %s or %s", c.StateLayout, online.LayoutMember, online.LayoutPartition), string(online.LayoutPartition)))
	}
	if c.StateLayout != online.LayoutPartition && c.Checkpoint.ChangelogTopic != "" && c.Checkpoint.ChangelogTopic != ChangelogOff {
		errs = append(errs, fieldError("checkpoint.changelog_topic", "only state_layout partition keeps state per partition, to restore from a changelog; set state_layout: partition or remove it", ChangelogOff))
	}
	if c.Checkpoint.ChangelogTopic != "" && slices.Contains([]string{k.InputTopic, k.OutputTopic, k.DeadLetterTopic}, c.Checkpoint.ChangelogTopic) {
		errs = append(errs, fieldError("checkpoint.changelog_topic", "must differ from the input, output and dead-letter topics", k.Group+"."+k.InputTopic+".state"))
	}
	if c.StateLayout != online.LayoutPartition && c.Sharing.Topic != "" && c.Sharing.Topic != SharingOff {
		errs = append(errs, fieldError("sharing.topic", "only the models of state_layout partition share what they learn; set state_layout: partition or remove it", SharingOff))
	}
	if c.Sharing.Topic != "" && c.Sharing.Topic != SharingOff && slices.Contains([]string{k.InputTopic, k.OutputTopic, k.DeadLetterTopic, c.Checkpoint.ChangelogTopic}, c.Sharing.Topic) {
		errs = append(errs, fieldError("sharing.topic", "must differ from the input, output, dead-letter and changelog topics", k.Group+"."+k.InputTopic+".shared"))
	}
	if c.Sharing.Interval < 10*time.Millisecond {
		errs = append(errs, fieldError("sharing.interval", "must be at least 10ms", "5s"))
	}
	if c.Sharing.EveryEvents < 1 {
		errs = append(errs, fieldError("sharing.every_events", "must be at least 1", "1000"))
	}
	if c.Sharing.Retention < time.Second {
		errs = append(errs, fieldError("sharing.retention", "must be at least 1s", "1h"))
	}
	if !producer.ValidCompression(k.Compression) {
		errs = append(errs, fieldError("kafka.compression", fmt.Sprintf("%q is not none, gzip, snappy, lz4 or zstd", k.Compression), "none"))
	}
	if err := CheckClasses(c.Model); err != nil {
		errs = append(errs, err)
	}
	if err := c.Fields.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("%w: %w", ErrConfig, err))
	}
	if err := c.Model.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("%w: model: %w; fix the model section of the config file, the DENOISER_MODEL_* variable or --set model.FIELD=VALUE", ErrConfig, err))
	}
	return errors.Join(errs...)
}

// BaseConfig is the Config that the file and the other layers are applied
// over: zero, but for the model's settings that DefaultConfig sets
// (online.DefaultConfig: model.transition_user_offset on,
// model.dwell_direction long). WithDefaults fills in the rest.
func BaseConfig() Config { return Config{Model: online.DefaultConfig()} }

// LoadConfig reads a YAML file over BaseConfig. Unknown keys are errors, so
// that a typo does not silently fall back to a default; every wrong line
// is reported, each naming its setting and what to write. An empty path
// gives BaseConfig.
func LoadConfig(path string) (Config, error) {
	c, _, err := loadConfig(path)
	return c, err
}

// loadConfig is LoadConfig, and the settings the file sets.
func loadConfig(path string) (c Config, set []string, err error) {
	c = BaseConfig()
	if path == "" {
		return c, nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return c, nil, fmt.Errorf("read config: %w", err)
	}
	set, err = c.decodeYAML(b)
	if err != nil {
		return c, set, fmt.Errorf("%w: %s: %w", ErrConfig, path, err)
	}
	return c, set, nil
}

// EnvPrefix starts the environment variables that override the config.
const EnvPrefix = "DENOISER_"

// EnvName is the environment variable of a config path:
// "kafka.input_topic" -> "DENOISER_KAFKA_INPUT_TOPIC".
func EnvName(path string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(path, ".", "_"))
}

// Paths lists every settable config path ("kafka.brokers", "model.dim",
// ...), in declaration order.
func Paths() []string {
	var out []string
	walk(reflect.TypeOf(Config{}), "", func(path string, _ []int) { out = append(out, path) })
	return out
}

// walk calls fn for every leaf field of struct type t, with its dotted yaml
// path and field index.
func walk(t reflect.Type, prefix string, fn func(path string, index []int)) {
	var rec func(t reflect.Type, prefix string, index []int)
	rec = func(t reflect.Type, prefix string, index []int) {
		for i := range t.NumField() {
			f := t.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			idx := append(slices.Clone(index), i)
			if name == "" && opts == "inline" && f.Type.Kind() == reflect.Struct {
				rec(f.Type, prefix, idx) // an embedded config: its fields are this struct's
				continue
			}
			if name == "" || name == "-" || !f.IsExported() {
				continue
			}
			path := name
			if prefix != "" {
				path = prefix + "." + name
			}
			if f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeOf(time.Duration(0)) {
				rec(f.Type, path, idx)
				continue
			}
			fn(path, idx)
		}
	}
	rec(t, prefix, nil)
}

// Set sets the field at a dotted yaml path from its text form: strings as
// they are, lists comma-separated (or a YAML flow list "[a, b]"), integers
// (3.5 is an error, not 3), numbers, booleans and durations ("250ms").
func (c *Config) Set(path, value string) error {
	l, ok := findLeaf(path)
	if !ok {
		section, key, found := strings.Cut(path, ".")
		if _, isSection := keysUnder(section); !found || !isSection {
			section, key = "", path
		}
		return fmt.Errorf("%w: %s: %s", ErrConfig, path, unknownKey(section, key))
	}
	if err := setValue(reflect.ValueOf(c).Elem().FieldByIndex(l.index), path, value); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrConfig, path, err)
	}
	return nil
}

// ApplyEnv sets every field whose variable (EnvName) is in environ
// ("KEY=value" entries, as os.Environ returns). It returns the DENOISER_*
// variables that name no field, so that the caller can warn about them.
func (c *Config) ApplyEnv(environ []string) (unknown []string, err error) {
	unknown, _, err = c.applyEnv(environ)
	return unknown, err
}

// applyEnv is ApplyEnv, and the settings it set.
func (c *Config) applyEnv(environ []string) (unknown, set []string, err error) {
	known := map[string]string{}
	for _, p := range Paths() {
		known[EnvName(p)] = p
	}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(k, EnvPrefix) {
			continue
		}
		path, ok := known[k]
		if !ok {
			unknown = append(unknown, k)
			continue
		}
		if err := c.Set(path, v); err != nil {
			return unknown, set, fmt.Errorf("environment %s: %w", k, err)
		}
		set = append(set, path)
	}
	return unknown, set, nil
}

// CheckClasses refuses model.classes outside rating mode, where it is
// not read: binary and dwell mode take their number of classes from the
// mode. Replay and the demo check it as `denoiser run` does.
func CheckClasses(m online.Config) error {
	if m = m.WithDefaults(); m.Mode != online.ModeRating && m.Classes != 0 && m.Classes != m.K() {
		return fieldError("model.classes", fmt.Sprintf("%d, but only rating mode reads it: %s mode has %d classes", m.Classes, m.Mode, m.K()),
			strconv.Itoa(m.K()))
	}
	return nil
}
