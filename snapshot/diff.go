package snapshot

import (
	"fmt"
	"math"
	"reflect"
	"strings"

	"denoiser/consumer/input"
	"denoiser/online"
)

// DiffReport is what `denoiser snapshot diff A B` shows: what changed from
// snapshot A to snapshot B. Its JSON form is the --json output.
type DiffReport struct {
	A string `json:"a"`
	B string `json:"b"`

	ModelVersion Count      `json:"model_version"`
	Events       Count      `json:"events"`
	Users        Count      `json:"users"`
	Items        Count      `json:"items"`
	Distilled    Count      `json:"distilled"`
	Refits       Count      `json:"refits"`
	NumErrors    Count      `json:"numerical_errors"`
	Rho          [2]float64 `json:"rho"`

	// ConfigChanges lists the configuration fields that differ.
	ConfigChanges []FieldChange `json:"config_changes"`
	// Positions lists every partition in A or B with its next offset in
	// each (-1 when absent).
	Positions []PositionChange `json:"positions"`

	// MeanT is the mean T̂ of A and B and B−A; MaxAbsDelta its largest
	// entry in absolute value. Nil when K differs.
	MeanT *MatrixChange `json:"mean_transition"`
	// GMM holds both mixtures; MaxMeanShift is the largest distance a
	// component mean moved (components matched by index).
	GMM GMMChange `json:"gmm"`

	// UserDrift and ItemDrift measure how far the embeddings of the ids
	// present in both snapshots moved.
	UserDrift Drift `json:"user_drift"`
	ItemDrift Drift `json:"item_drift"`
}

// Count is a counter in A and B.
type Count struct {
	A     uint64 `json:"a"`
	B     uint64 `json:"b"`
	Delta int64  `json:"delta"`
}

func count(a, b uint64) Count { return Count{A: a, B: b, Delta: int64(b - a)} }

// FieldChange is one configuration field whose value differs.
type FieldChange struct {
	Field string `json:"field"`
	A     string `json:"a"`
	B     string `json:"b"`
}

// PositionChange is one partition's next offset in A and B (-1 absent).
type PositionChange struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	A         int64  `json:"a"`
	B         int64  `json:"b"`
}

// MatrixChange is a K×K matrix in A, in B, and B−A.
type MatrixChange struct {
	A           [][]float64 `json:"a"`
	B           [][]float64 `json:"b"`
	Delta       [][]float64 `json:"delta"`
	MaxAbsDelta float64     `json:"max_abs_delta"`
}

// GMMChange is the mixture in A and B.
type GMMChange struct {
	A            online.GMMSummary `json:"a"`
	B            online.GMMSummary `json:"b"`
	MaxMeanShift float64           `json:"max_mean_shift"`
}

// Drift is the L2 distance between the embeddings of the same id in A and
// B, over the ids in both.
type Drift struct {
	Common int `json:"common"`
	OnlyA  int `json:"only_a"`
	OnlyB  int `json:"only_b"`
	// Comparable is false when the dimensions differ; then nothing below
	// is computed.
	Comparable bool    `json:"comparable"`
	Mean       float64 `json:"mean"`
	Max        float64 `json:"max"`
	MaxID      string  `json:"max_id,omitempty"`
}

// Diff compares snapshot a (named nameA) with b. It does not change either
// model.
func Diff(a *Snapshot, nameA string, b *Snapshot, nameB string) DiffReport {
	ma, mb := a.Model, b.Model
	sa, sb := ma.Summary(), mb.Summary()
	d := DiffReport{
		A: nameA, B: nameB,
		ModelVersion: count(ma.Version(), mb.Version()),
		Events:       count(sa.Events, sb.Events),
		Users:        count(uint64(sa.Users), uint64(sb.Users)),
		Items:        count(uint64(sa.Items), uint64(sb.Items)),
		Distilled:    count(sa.Distilled, sb.Distilled),
		Refits:       count(sa.Refits, sb.Refits),
		NumErrors:    count(sa.NumericalErrors, sb.NumericalErrors),
		Rho:          [2]float64{sa.Rho, sb.Rho},
		GMM:          GMMChange{A: sa.GMM, B: sb.GMM},
	}
	d.ConfigChanges = configChanges(ma.Config(), mb.Config())
	d.Positions = positionChanges(a.Positions, b.Positions)
	if ma.K() == mb.K() {
		d.MeanT = matrixChange(sa.MeanTransition, sb.MeanTransition)
	}
	for c := range 2 {
		ca, cb := sa.GMM.Components[c].Mean, sb.GMM.Components[c].Mean
		d.GMM.MaxMeanShift = math.Max(d.GMM.MaxMeanShift, math.Hypot(cb[0]-ca[0], cb[1]-ca[1]))
	}
	d.UserDrift = drift(ma.Dim() == mb.Dim(), ma.NumUsers(), mb.NumUsers(), ma.UserID, mb.UserIndex, ma.UserEmbedding, mb.UserEmbedding)
	d.ItemDrift = drift(ma.Dim() == mb.Dim(), ma.NumItems(), mb.NumItems(), ma.ItemID, mb.ItemIndex, ma.ItemEmbedding, mb.ItemEmbedding)
	return d
}

// configChanges lists the fields of online.Config whose values differ,
// by their JSON names.
func configChanges(a, b online.Config) []FieldChange {
	out := []FieldChange{}
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	for i := range va.NumField() {
		fa, fb := va.Field(i).Interface(), vb.Field(i).Interface()
		if !reflect.DeepEqual(fa, fb) {
			out = append(out, FieldChange{Field: jsonName(va.Type().Field(i)), A: fmt.Sprint(fa), B: fmt.Sprint(fb)})
		}
	}
	return out
}

func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "" || name == "-" {
		return f.Name
	}
	return name
}

// positionChanges merges two sorted position lists.
func positionChanges(a, b []input.Position) []PositionChange {
	out := []PositionChange{}
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || (i < len(a) && input.ComparePartitions(a[i], b[j]) < 0):
			out = append(out, PositionChange{Topic: a[i].Topic, Partition: a[i].Partition, A: a[i].Offset, B: -1})
			i++
		case i == len(a) || input.ComparePartitions(a[i], b[j]) > 0:
			out = append(out, PositionChange{Topic: b[j].Topic, Partition: b[j].Partition, A: -1, B: b[j].Offset})
			j++
		default:
			out = append(out, PositionChange{Topic: a[i].Topic, Partition: a[i].Partition, A: a[i].Offset, B: b[j].Offset})
			i++
			j++
		}
	}
	return out
}

func matrixChange(a, b [][]float64) *MatrixChange {
	m := &MatrixChange{A: a, B: b, Delta: make([][]float64, len(a))}
	for r := range a {
		m.Delta[r] = make([]float64, len(a[r]))
		for c := range a[r] {
			m.Delta[r][c] = b[r][c] - a[r][c]
			m.MaxAbsDelta = math.Max(m.MaxAbsDelta, math.Abs(m.Delta[r][c]))
		}
	}
	return m
}

// drift compares the rows of the ids of A that B also has.
func drift(sameDim bool, na, nb int, idA func(int) string, indexB func(string) (int, bool),
	rowA, rowB func([]float64, int) []float64) Drift {
	var d Drift
	d.Comparable = sameDim
	var va, vb []float64
	sum := 0.0
	for i := range na {
		j, ok := indexB(idA(i))
		if !ok {
			d.OnlyA++
			continue
		}
		d.Common++
		if !sameDim {
			continue
		}
		va, vb = rowA(va, i), rowB(vb, j)
		dist := 0.0
		for k := range va {
			dist += (va[k] - vb[k]) * (va[k] - vb[k])
		}
		dist = math.Sqrt(dist)
		sum += dist
		if dist > d.Max || d.MaxID == "" {
			d.Max, d.MaxID = dist, idA(i)
		}
	}
	d.OnlyB = nb - d.Common
	if d.Common > 0 && sameDim {
		d.Mean = sum / float64(d.Common)
	}
	return d
}
