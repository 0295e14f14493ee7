package snapshot

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"denoiser/consumer/input"
	"denoiser/online"
	"denoiser/online/onlinetest"
)

func readBack(t *testing.T, m *online.Model, ps []input.Position) *Snapshot {
	t.Helper()
	var b bytes.Buffer
	if _, err := Write(&b, Contents{Model: m, Positions: ps, Meta: testMeta}); err != nil {
		t.Fatal(err)
	}
	s, err := Read(&b)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestInspect: the report matches the model it describes, norms are
// computed from the embeddings, and both renderings carry every section.
func TestInspect(t *testing.T) {
	m := onlinetest.New(t, onlinetest.SmallConfig(online.ModeRating))
	step(t, m, onlinetest.Stream(2500, 8))
	s := readBack(t, m, testPositions)
	r := Inspect(s, "x.snap")

	if r.ModelVersion != 2500 || r.Model.Users != m.NumUsers() || r.Model.Items != m.NumItems() || r.K != 5 || r.Dim != 8 {
		t.Fatalf("report version %d users %d items %d K %d d %d", r.ModelVersion, r.Model.Users, r.Model.Items, r.K, r.Dim)
	}
	if len(r.Model.MeanTransition) != 5 || len(r.Positions) != len(testPositions) {
		t.Fatalf("report lacks T̂ or positions: %+v", r)
	}
	// Norms by hand.
	var v []float64
	mx, sum := 0.0, 0.0
	for u := range m.NumUsers() {
		v = m.UserEmbedding(v, u)
		n := 0.0
		for _, x := range v {
			n += x * x
		}
		mx = math.Max(mx, math.Sqrt(n))
		sum += math.Sqrt(n)
	}
	if n := r.Norms.Users; n.Count != m.NumUsers() || n.Max != mx || math.Abs(n.Mean-sum/float64(n.Count)) > 1e-12 ||
		!(n.Min <= n.P50 && n.P50 <= n.P90 && n.P90 <= n.P99 && n.P99 <= n.Max) {
		t.Fatalf("user norms %+v, want max %v mean %v", n, mx, sum/float64(m.NumUsers()))
	}

	var txt bytes.Buffer
	if err := r.WriteText(&txt); err != nil {
		t.Fatal(err)
	}
	gmm := "not fitted yet"
	if r.Model.GMM.Fitted {
		gmm = "(reliable)"
	}
	for _, want := range []string{"x.snap", fmt.Sprintf("snapshot v%d", FormatVersion), "version 2500", "clicks", "mean T̂", "clean 4", "obs 4",
		gmm, "embedding norms", "users", "items", "mode=rating", "checkpoint generation 7"} {
		if !strings.Contains(txt.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, txt.String())
		}
	}
	js, err := json.Marshal(&r)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	if back.ModelVersion != r.ModelVersion || back.Norms != r.Norms || back.Config.Mode != online.ModeRating {
		t.Fatalf("JSON report does not round-trip: %s", js)
	}
}

// TestInspectShowsEverySetting: inspect shows every setting of a current
// snapshot, those at zero too (it left out no_context, max_users,
// max_items, admit_after and admit_sketch_width), and classes as the K of
// the mode (it showed classes=0 in binary mode), in text and JSON; a
// snapshot of an earlier format shows what it showed (testdata/v1).
func TestInspectShowsEverySetting(t *testing.T) {
	m := onlinetest.New(t, onlinetest.SmallConfig(online.ModeBinary))
	step(t, m, onlinetest.Stream(300, 3))
	r := Inspect(readBack(t, m, nil), "")
	var txt bytes.Buffer
	if err := r.WriteText(&txt); err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(&r)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"no_context", "max_users", "max_items", "admit_after", "admit_sketch_width", "dwell_direction"} {
		if !strings.Contains(txt.String(), "  "+name+"=") || !strings.Contains(string(js), `"`+name+`":`) {
			t.Errorf("inspect does not show %s:\n%s\n%s", name, txt.String(), js)
		}
	}
	if !strings.Contains(txt.String(), "classes=2 ") || !strings.Contains(string(js), `"classes":2`) {
		t.Errorf("binary mode's classes not shown as 2:\n%s\n%s", txt.String(), js)
	}
	var back Report
	if err := json.Unmarshal(js, &back); err != nil || back.Config.Mode != online.ModeBinary || back.Config.Dim != r.Config.Dim {
		t.Fatalf("JSON report does not round-trip: %v: %s", err, js)
	}

	old, err := ReadFile(golden(1, "snap"))
	if err != nil {
		t.Fatal(err)
	}
	var oldTxt bytes.Buffer
	r = Inspect(old, "")
	if err := r.WriteText(&oldTxt); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(oldTxt.String(), "no_context=") || !strings.Contains(oldTxt.String(), "classes=0") {
		t.Errorf("a format 1 snapshot renders otherwise than it did:\n%s", oldTxt.String())
	}
}

// TestDiff: a snapshot against itself shows no change; against a later one
// of the same model it shows the events, positions and drift in between.
func TestDiff(t *testing.T) {
	evs := onlinetest.Stream(3000, 9)
	m := onlinetest.New(t, onlinetest.SmallConfig(online.ModeBinary))
	step(t, m, evs[:2000])
	a := readBack(t, m, []input.Position{{Topic: "clicks", Partition: 0, Offset: 2000}, {Topic: "old", Offset: 5}})
	step(t, m, evs[2000:])
	m.Step(online.Event{User: "new-user", Item: "new-item"}, &online.Score{})
	b := readBack(t, m, []input.Position{{Topic: "clicks", Partition: 0, Offset: 3001}, {Topic: "clicks", Partition: 1, Offset: 9}})

	same := Diff(a, "a", a, "a")
	if same.Events.Delta != 0 || same.UserDrift.Max != 0 || same.ItemDrift.Max != 0 || same.MeanT.MaxAbsDelta != 0 ||
		same.GMM.MaxMeanShift != 0 || len(same.ConfigChanges) != 0 || same.UserDrift.Common != a.Model.NumUsers() {
		t.Fatalf("a snapshot differs from itself: %+v", same)
	}

	d := Diff(a, "a", b, "b")
	if d.Events.Delta != 1001 || d.Users.Delta != 1 || d.Items.Delta != 1 || d.ModelVersion.B != 3001 {
		t.Fatalf("counts %+v %+v %+v", d.Events, d.Users, d.Items)
	}
	if d.UserDrift.OnlyB != 1 || d.UserDrift.OnlyA != 0 || d.UserDrift.Common != a.Model.NumUsers() || !d.UserDrift.Comparable {
		t.Fatalf("user drift %+v", d.UserDrift)
	}
	// The maximum drift is the distance of the reported id, computed here.
	ia, _ := a.Model.UserIndex(d.UserDrift.MaxID)
	ib, _ := b.Model.UserIndex(d.UserDrift.MaxID)
	pa, pb := a.Model.UserEmbedding(nil, ia), b.Model.UserEmbedding(nil, ib)
	dist := 0.0
	for k := range pa {
		dist += (pa[k] - pb[k]) * (pa[k] - pb[k])
	}
	if d.UserDrift.Max <= 0 || math.Abs(d.UserDrift.Max-math.Sqrt(dist)) > 1e-12 || d.UserDrift.Mean > d.UserDrift.Max {
		t.Fatalf("max drift %v of %s, recomputed %v (mean %v)", d.UserDrift.Max, d.UserDrift.MaxID, math.Sqrt(dist), d.UserDrift.Mean)
	}
	wantPos := []PositionChange{{"clicks", 0, 2000, 3001}, {"clicks", 1, -1, 9}, {"old", 0, 5, -1}}
	if len(d.Positions) != len(wantPos) {
		t.Fatalf("positions %+v, want %+v", d.Positions, wantPos)
	}
	for j := range wantPos {
		if d.Positions[j] != wantPos[j] {
			t.Fatalf("positions %+v, want %+v", d.Positions, wantPos)
		}
	}
	if d.MeanT == nil || d.MeanT.Delta[0][1] != d.MeanT.B[0][1]-d.MeanT.A[0][1] {
		t.Fatalf("mean T̂ change %+v", d.MeanT)
	}

	other := onlinetest.SmallConfig(online.ModeRating)
	other.Dim = 4
	mr := onlinetest.New(t, other)
	step(t, mr, evs[:500])
	x := Diff(a, "a", readBack(t, mr, nil), "r")
	if x.MeanT != nil || x.UserDrift.Comparable || len(x.ConfigChanges) < 2 {
		t.Fatalf("models of different shape: T̂ %v, comparable %v, config changes %v", x.MeanT, x.UserDrift.Comparable, x.ConfigChanges)
	}
	var txt bytes.Buffer
	for _, r := range []DiffReport{d, x} {
		if err := r.WriteText(&txt); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"+1001", "clicks", "max |B-A|", "embedding drift", d.UserDrift.MaxID, "dimensions differ", "K differs", "mode"} {
		if !strings.Contains(txt.String(), want) {
			t.Errorf("diff text lacks %q:\n%s", want, txt.String())
		}
	}
}

// TestConfigPairsEventOrder: a list of names renders as JSON, so that an
// event_order group with a space in a name ("Order Cancelled") reads as
// one group (fmt's [a b c] could not show where it ends).
func TestConfigPairsEventOrder(t *testing.T) {
	c := online.DefaultConfig()
	c.EventOrder = []string{"return|Order Cancelled", "view", "purchase|Order Completed"}
	want := `event_order=["return|Order Cancelled","view","purchase|Order Completed"]`
	for _, p := range configPairs(Settings{Config: c, all: true}) {
		if strings.HasPrefix(p, "event_order=") {
			if p != want {
				t.Fatalf("%s, want %s", p, want)
			}
			return
		}
	}
	t.Fatal("no event_order among the pairs")
}
