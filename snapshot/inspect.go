package snapshot

import (
	"encoding/json"
	"math"
	"reflect"
	"slices"

	"denoiser/consumer/input"
	"denoiser/online"
)

// Report is what `denoiser snapshot inspect` shows: everything an operator
// needs to see what a snapshot holds without loading it into a service.
// Its JSON form is the --json output.
type Report struct {
	File          string `json:"file,omitempty"`
	FormatVersion uint32 `json:"format_version"`
	ModelEncoding uint32 `json:"model_encoding"`
	Bytes         int64  `json:"bytes"`
	ModelBytes    int64  `json:"model_bytes"`
	Checksum      string `json:"crc32c"`
	Meta          Meta   `json:"meta"`
	// ModelVersion is the model's version: the number of events learned.
	ModelVersion uint64           `json:"model_version"`
	Config       Settings         `json:"config"`
	K            int              `json:"k"`
	Dim          int              `json:"dim"`
	Positions    []input.Position `json:"positions"`
	// Model holds the counts, ρ, the GMM components and the mean T̂.
	Model online.Summary `json:"model"`
	Norms struct {
		Users NormStats `json:"users"`
		Items NormStats `json:"items"`
	} `json:"embedding_norms"`
}

// Settings is a model's configuration as inspect shows it: every setting,
// its zero value too, with classes the K the mode implies (2 in binary
// mode, as denoiser run --print-config shows it), for a snapshot of
// format allSettingsFrom or later. A snapshot of an earlier format shows
// what it showed when the golden files of those formats were made
// (testdata/v1, v2): the model's own JSON, which leaves out the zero
// value of the settings added since (no_context, max_users, ...).
type Settings struct {
	online.Config
	all bool // every setting, zeros included
}

// allSettingsFrom is the first snapshot format whose inspection shows
// every setting (Settings).
const allSettingsFrom = 3

// settingsOf is c, of a model with k classes, as a snapshot of format
// version shows it.
func settingsOf(c online.Config, k int, version uint32) Settings {
	if version < allSettingsFrom {
		return Settings{Config: c}
	}
	if c.Mode != online.ModeRating && c.Classes == 0 {
		c.Classes = k
	}
	return Settings{Config: c, all: true}
}

// MarshalJSON writes the configuration's JSON, with every setting when
// s shows them all (Settings).
func (s Settings) MarshalJSON() ([]byte, error) {
	if !s.all {
		return json.Marshal(s.Config)
	}
	v := reflect.ValueOf(s.Config)
	out := []byte{'{'}
	for i := range v.NumField() {
		b, err := json.Marshal(v.Field(i).Interface())
		if err != nil {
			return nil, err
		}
		if i > 0 {
			out = append(out, ',')
		}
		name, _ := json.Marshal(jsonName(v.Type().Field(i)))
		out = append(append(append(out, name...), ':'), b...)
	}
	return append(out, '}'), nil
}

// NormStats summarises the L2 norms of a set of embedding rows.
type NormStats struct {
	Count int     `json:"count"`
	Min   float64 `json:"min"`
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
}

// Inspect describes s; file is the name to show (may be empty). It does
// not change the model.
func Inspect(s *Snapshot, file string) Report {
	m := s.Model
	r := Report{
		File:          file,
		FormatVersion: s.FormatVersion,
		ModelEncoding: s.ModelEncoding,
		Bytes:         s.Bytes,
		ModelBytes:    s.ModelBytes,
		Checksum:      s.ChecksumHex(),
		Meta:          s.Meta,
		ModelVersion:  m.Version(),
		Config:        settingsOf(m.Config(), m.K(), s.FormatVersion),
		K:             m.K(),
		Dim:           m.Dim(),
		Positions:     s.Positions,
		Model:         m.Summary(),
	}
	if r.Positions == nil {
		r.Positions = []input.Position{}
	}
	r.Norms.Users = normStats(m.NumUsers(), m.UserEmbedding)
	r.Norms.Items = normStats(m.NumItems(), m.ItemEmbedding)
	return r
}

// normStats computes the norm statistics of n rows read by row.
func normStats(n int, row func(dst []float64, i int) []float64) NormStats {
	if n == 0 {
		return NormStats{}
	}
	norms := make([]float64, n)
	var v []float64
	sum := 0.0
	for i := range norms {
		v = row(v, i)
		norms[i] = l2(v)
		sum += norms[i]
	}
	slices.Sort(norms)
	return NormStats{
		Count: n,
		Min:   norms[0],
		Mean:  sum / float64(n),
		P50:   quantile(norms, 0.5),
		P90:   quantile(norms, 0.9),
		P99:   quantile(norms, 0.99),
		Max:   norms[n-1],
	}
}

// quantile is the nearest-rank q-quantile of sorted, non-empty s.
func quantile(s []float64, q float64) float64 {
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func l2(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x * x
	}
	return math.Sqrt(s)
}
