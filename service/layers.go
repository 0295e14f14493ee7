package service

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// Layers are the sources of the configuration of `denoiser run`, each
// applied over the ones before it: the file, then the environment, then
// flags, then --set overrides.
type Layers struct {
	// File is the YAML configuration file (see LoadConfig); "" for none.
	File string
	// Environ holds "KEY=value" entries, as os.Environ returns; each
	// DENOISER_* variable sets the setting it names (see ApplyEnv).
	Environ []string
	// Flags maps setting paths ("kafka.brokers") to the values of the flags
	// that stand for them (--brokers).
	Flags map[string]string
	// Sets are "PATH=VALUE" overrides (--set), applied last, in order.
	Sets []string
}

// Load returns the configuration the layers make, without defaults and
// not validated (see Config.Validate; New validates), and the DENOISER_*
// variables that name no setting, so that the caller can warn about them
// once it has a logger. Errors wrap ErrConfig, or are the file's I/O
// errors; every wrong flag and --set is reported, not only the first.
func (l Layers) Load() (cfg Config, unknownEnv []string, err error) {
	cfg, explicit, err := loadConfig(l.File)
	if err != nil {
		return cfg, nil, err
	}
	unknownEnv, fromEnv, err := cfg.applyEnv(l.Environ)
	if err != nil {
		return cfg, unknownEnv, err
	}
	explicit = append(explicit, fromEnv...)
	var setErr error
	for _, path := range slices.Sorted(maps.Keys(l.Flags)) {
		err := cfg.Set(path, l.Flags[path])
		setErr = errors.Join(setErr, err)
		explicit = append(explicit, path)
	}
	for _, s := range l.Sets {
		path, value, ok := strings.Cut(s, "=")
		if !ok {
			setErr = errors.Join(setErr, fmt.Errorf("--set %q: want PATH=VALUE", s))
			continue
		}
		setErr = errors.Join(setErr, cfg.Set(path, value))
		explicit = append(explicit, path)
	}
	if setErr != nil {
		return cfg, unknownEnv, setErr
	}
	slices.Sort(explicit)
	return cfg, unknownEnv, checkExplicitZeros(cfg, slices.Compact(explicit))
}

// EffectiveYAML is c with every default filled in, the model's included
// (classes is the K its mode implies: 2 in binary mode), as YAML: what `denoiser run --print-config` prints.
func (c Config) EffectiveYAML() ([]byte, error) {
	var doc yaml.Node
	if err := doc.Encode(defaultsOf(c)); err != nil {
		return nil, fmt.Errorf("encode config: %w", err)
	}
	noteModeDefaults(&doc)
	b, err := yaml.Marshal(&doc)
	if err != nil {
		return nil, fmt.Errorf("encode config: %w", err)
	}
	return b, nil
}

// modeDefaults are the model settings whose defaults follow model.mode,
// with what to say of them in a printed configuration: a file printed in
// binary mode and edited to rating mode would otherwise keep binary
// mode's values (classes 2 refuses every rating above 2).
var modeDefaults = map[string]string{
	"classes":          "follows mode: binary 2, rating 5, dwell the thresholds + 1; delete this line if you change the mode",
	"negatives":        "mode's default: binary 4, rating and dwell 0; delete this line if you change the mode",
	"embedding_rate":   "mode's default: binary 0.3, rating and dwell 0.05; delete this line if you change the mode",
	"dwell_buckets_ms": "dwell mode's default [10000, 30000]; read only in dwell mode",
}

// noteModeDefaults adds modeDefaults' comments to the model section of a
// configuration document.
func noteModeDefaults(doc *yaml.Node) {
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		doc = doc.Content[0]
	}
	if doc.Kind != yaml.MappingNode {
		return
	}
	root := doc.Content
	for i := 0; i+1 < len(root); i += 2 {
		if model := root[i+1]; root[i].Value == "model" && model.Kind == yaml.MappingNode {
			for j := 0; j+1 < len(model.Content); j += 2 {
				if note, ok := modeDefaults[model.Content[j].Value]; ok {
					model.Content[j+1].LineComment = note
				}
			}
		}
	}
}

// NewLogger returns the process logger for c (zero fields: their
// defaults), writing to w.
func NewLogger(c LogConfig, w io.Writer) *slog.Logger {
	var level slog.Level // info, also for "" (the default)
	_ = level.UnmarshalText([]byte(c.Level))
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
