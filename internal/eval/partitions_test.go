package eval

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"denoiser/internal/synth"
	"denoiser/online"
)

func smallStream(t *testing.T, events int) *stream {
	t.Helper()
	s, err := detectCase{config: synth.Config{Events: events, Noise: 0.2, Profile: synth.ProfileV2, DwellShare: 1}}.stream(3)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// One partition is the single model: the same seed gives the same weights.
func TestPartitionedOneIsTheModel(t *testing.T) {
	s := smallStream(t, 3000)
	got, _, err := partitionedScores(s, online.Config{}, 7, 1, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	m, err := online.New(online.Config{}, online.NewSource(7))
	if err != nil {
		t.Fatal(err)
	}
	var sc online.Score
	for e, ev := range s.events {
		if err := m.Step(ev, &sc); err != nil {
			t.Fatal(err)
		}
		if got[e] != sc.Weight {
			t.Fatalf("event %d: weight %v, the single model's %v", e, got[e], sc.Weight)
		}
	}
}

// Merging changes the partition models' scores, and each partition's
// scores depend only on its own events and the merges: scoring the events
// in another interleaving across partitions, with merges at the same
// points of every partition's stream, gives the same weights.
func TestPartitionedMerging(t *testing.T) {
	s := smallStream(t, 6000)
	isolated, _, err := partitionedScores(s, online.Config{}, 1, 3, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	merged, _, err := partitionedScores(s, online.Config{}, 1, 3, 500, false)
	if err != nil {
		t.Fatal(err)
	}
	same := 0
	for e := range merged {
		if merged[e] == isolated[e] {
			same++
		}
	}
	if same > len(merged)*3/4 {
		t.Fatalf("%d of %d weights unchanged by merging", same, len(merged))
	}
	// Within each block of 500 events between two merge points, move the
	// events of partition 0 to the end: their models see their own events
	// in the same order and merge at the same points.
	parts := partitionOf(s.events, 3)
	perm := make([]int, 0, len(s.events))
	for lo := 0; lo < len(s.events); lo += 500 {
		var first, last []int
		for e := lo; e < min(lo+500, len(s.events)); e++ {
			if parts[e] == 0 {
				last = append(last, e)
			} else {
				first = append(first, e)
			}
		}
		perm = append(append(perm, first...), last...)
	}
	shuffled := &stream{genuine: s.genuine}
	for _, e := range perm {
		shuffled.events = append(shuffled.events, s.events[e])
	}
	again, _, err := partitionedScores(shuffled, online.Config{}, 1, 3, 500, false)
	if err != nil {
		t.Fatal(err)
	}
	for k, e := range perm {
		if again[k] != merged[e] {
			t.Fatalf("event %d: weight %v in the other interleaving, %v", e, again[k], merged[e])
		}
	}
}

// Merging a round late merges nothing at the first round, so that the
// scores up to the second equal the isolated models', and the deltas of
// the round before at every round after, so that they differ from both
// the isolated scores and those of merging on time.
func TestPartitionedLagged(t *testing.T) {
	s := smallStream(t, 3000)
	isolated, _, err := partitionedScores(s, online.Config{}, 1, 3, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	onTime, _, err := partitionedScores(s, online.Config{}, 1, 3, 500, false)
	if err != nil {
		t.Fatal(err)
	}
	late, _, err := partitionedScores(s, online.Config{}, 1, 3, 500, true)
	if err != nil {
		t.Fatal(err)
	}
	for e := range 1000 {
		if late[e] != isolated[e] {
			t.Fatalf("event %d, before the second round: weight %v merged a round late, %v isolated", e, late[e], isolated[e])
		}
	}
	asIsolated, asOnTime := 0, 0
	for e := 1000; e < len(late); e++ {
		if late[e] == isolated[e] {
			asIsolated++
		}
		if late[e] == onTime[e] {
			asOnTime++
		}
	}
	if n := len(late) - 1000; asIsolated > n/2 || asOnTime > n/2 {
		t.Fatalf("after the second round, of %d weights merged a round late %d equal the isolated and %d those merged on time", n, asIsolated, asOnTime)
	}
	if onTime[600] == isolated[600] && onTime[700] == isolated[700] {
		t.Fatal("merging on time changed nothing after the first round")
	}
}

// A recorded log is read with its truth; a log that lacks the truth of an
// event, or holds a line that does not decode, is refused with its line.
func TestReadLogStream(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	s, err := readLogStream(context.Background(), write("ok.jsonl",
		`{"user":"u1","item":"i1","ts":1700000000000,"dwell_ms":5000,"truth":"genuine"}`+"\n"+
			`{"user":"u2","item":"i1","event":"click","truth":"noise"}`+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.events) != 2 || !s.genuine[0] || s.genuine[1] || !s.events[0].HasDwell || s.events[0].DwellMS != 5000 || s.events[1].Kind != "click" {
		t.Fatalf("read %+v, genuine %v", s.events, s.genuine)
	}
	for name, body := range map[string]string{
		"notruth.jsonl": `{"user":"u1","item":"i1","truth":"genuine"}` + "\n" + `{"user":"u1","item":"i2"}` + "\n",
		"bad.jsonl":     `{"user":"u1","item":"i1","truth":"genuine"}` + "\n" + `{"user":` + "\n",
	} {
		if _, err := readLogStream(context.Background(), write(name, body)); err == nil || !strings.Contains(err.Error(), name+":2:") {
			t.Errorf("%s: error %v, want one naming line 2", name, err)
		}
	}
}

func TestRunPartitionsReport(t *testing.T) {
	res, err := RunPartitions(context.Background(), nil, PartitionsConfig{Partitions: 2, Every: []int{200}, SynthEvents: 4000,
		DwellShares: []float64{1}, Seeds: 1, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Cases) != 1 || len(res.Cases[0].Rows) != 3 {
		t.Fatalf("cases %+v, want one stream with three variants", res.Cases)
	}
	c := res.Cases[0]
	if c.BestBaseline == "" || c.BaselineAUC <= 0.5 {
		t.Fatalf("best baseline %q at %v: dwell separates this stream", c.BestBaseline, c.BaselineAUC)
	}
	for _, r := range c.Rows {
		if r.ROCAUC <= 0.5 || r.ROCAUC > 1 {
			t.Fatalf("%s: ROC-AUC %v", r.Variant, r.ROCAUC)
		}
	}
	dir := t.TempDir()
	if err := res.WriteReport(dir, Meta{Command: "test"}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "partitions.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "merged every 200 events") || !strings.Contains(string(b), "best baseline") {
		t.Fatalf("report lacks the merged row or the baseline:\n%s", b)
	}
	if _, err := RunPartitions(context.Background(), nil, PartitionsConfig{Partitions: 1}); err == nil {
		t.Fatal("one partition accepted")
	}
}
