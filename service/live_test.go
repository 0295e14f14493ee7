package service_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"denoiser/consumer/input"
	"denoiser/online"
	"denoiser/online/onlinetest"
	"denoiser/service"
	"denoiser/snapshot"
)

// owner plays the stream's model goroutine, as consumer.Run with
// Options.Tasks does: it steps events and, between two of them and while
// idle, runs the tasks it is handed. It is a service.ModelOwner.
type owner struct {
	m        *online.Model
	next     int64 // position: events stepped
	scores   []byte
	tasks    chan service.Task
	flushes  atomic.Int64
	flushErr error
	idle     chan struct{} // closed when every event is stepped
}

func (o *owner) Flush(context.Context) error { o.flushes.Add(1); return o.flushErr }

func (o *owner) ModelState() (*online.Set, []input.Position) {
	set, err := online.NewSetFrom(o.m, 1, online.LayoutMember)
	if err != nil {
		panic(err) // a member set of a model holds it as it is: never fails
	}
	return set, []input.Position{{Topic: "clicks", Partition: 0, Offset: o.next}}
}

func (o *owner) Submit(ctx context.Context, t service.Task) error {
	select {
	case o.tasks <- t:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run steps evs, pausing every `every` events so that requests arrive
// mid-stream, then serves tasks until ctx ends.
func (o *owner) run(ctx context.Context, t *testing.T, evs []online.Event, every int, paused chan<- int64) {
	var sc online.Score
	for j, ev := range evs {
		for {
			select {
			case task := <-o.tasks:
				if err := task(ctx, o); err != nil {
					t.Errorf("task returned %v; a live task must not stop the stream", err)
				}
				continue
			default:
			}
			break
		}
		if j > 0 && j%every == 0 && paused != nil {
			paused <- o.next // let the test request a snapshot here
			task := <-o.tasks
			if err := task(ctx, o); err != nil {
				t.Errorf("task returned %v", err)
			}
		}
		if err := o.m.Step(ev, &sc); err != nil {
			t.Errorf("event %d: %v", j, err)
		}
		o.scores = fmtScore(o.scores, sc)
		o.next++
	}
	if o.idle != nil {
		close(o.idle)
	}
	for {
		select {
		case task := <-o.tasks:
			if err := task(ctx, o); err != nil {
				t.Errorf("task returned %v", err)
			}
		case <-ctx.Done():
			return
		}
	}
}

func fmtScore(b []byte, sc online.Score) []byte {
	s, _ := json.Marshal(sc)
	return append(append(b, s...), '\n')
}

// TestLiveSnapshotsAreConsistent: snapshots taken from a running stream hold
// the model exactly at their positions: a model restored from any of them
// and fed the stream from its position scores every later event as the
// stream did. Output is flushed before each snapshot; the stream goes on.
func TestLiveSnapshotsAreConsistent(t *testing.T) {
	evs := onlinetest.Stream(3000, 11)
	dir := t.TempDir()
	o := &owner{m: onlinetest.New(t, onlinetest.SmallConfig(online.ModeBinary)), tasks: make(chan service.Task),
		idle: make(chan struct{})}
	live, err := service.NewLiveSnapshots(o, service.LiveSnapshotOptions{Dir: dir,
		Now: func() time.Time { return time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC) }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	paused := make(chan int64)
	stopped := make(chan struct{})
	go func() { defer close(stopped); o.run(ctx, t, evs, 700, paused) }()

	var results []service.SnapshotResult
	for range 4 { // at 700, 1400, 2100, 2800 events
		at := <-paused
		// The owner is between two events, waiting for one task: this
		// Export's. Its result arrives once the owner has moved on.
		res, err := live.Export(ctx, filepath.Join(dir, "mid.snap"+string(rune('0'+len(results)))), -1)
		if err != nil {
			t.Fatal(err)
		}
		if res.ModelVersion != uint64(at) || res.Paused <= 0 || res.Bytes <= 0 {
			t.Fatalf("snapshot at %d: %+v", at, res)
		}
		results = append(results, res)
	}
	// One at whatever point the running stream takes it.
	res, err := live.Export(ctx, filepath.Join(dir, "running.snap"), -1)
	if err != nil {
		t.Fatal(err)
	}
	results = append(results, res)
	<-o.idle
	idle, err := live.Export(ctx, "", -1) // after the stream: the idle owner serves it
	if err != nil {
		t.Fatal(err)
	}
	results = append(results, idle)
	if err := live.Close(); err != nil {
		t.Fatal(err)
	}
	cancel()
	<-stopped
	if filepath.Base(idle.Path) != "snapshot-3000-20250102T030405.000Z.snap" {
		t.Fatalf("idle snapshot named %s", idle.Path)
	}
	if got := o.flushes.Load(); got != int64(len(results)) {
		t.Fatalf("%d output flushes for %d snapshots", got, len(results))
	}

	whole := o.scores
	for _, res := range results {
		s, err := snapshot.ReadFile(res.Path)
		if err != nil {
			t.Fatal(err)
		}
		next := s.Positions[0].Offset
		if s.Model.Version() != uint64(next) || s.ChecksumHex() != res.Checksum || s.Meta.Source != "live" {
			t.Fatalf("%s: model version %d at position %d, meta %+v", res.Path, s.Model.Version(), next, s.Meta)
		}
		var tail []byte
		var sc online.Score
		for _, ev := range evs[next:] {
			if err := s.Model.Step(ev, &sc); err != nil {
				t.Fatal(err)
			}
			tail = fmtScore(tail, sc)
		}
		if !bytes.HasSuffix(whole, tail) || (next > 0 && bytes.Equal(whole, tail)) {
			t.Fatalf("%s: restored at %d, the rest of the stream scores differently", res.Path, next)
		}
	}
}

// TestLiveSnapshotFailures: a failed flush or a missing directory goes to the
// requester, not the stream; a request the owner never runs ends with its
// context and does not hold Close; after Close, Export refuses.
func TestLiveSnapshotFailures(t *testing.T) {
	ctx := context.Background()
	o := &owner{m: onlinetest.New(t, onlinetest.SmallConfig(online.ModeBinary)), tasks: make(chan service.Task, 1)}
	live, err := service.NewLiveSnapshots(o, service.LiveSnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	serveOne := func() {
		if err := (<-o.tasks)(ctx, o); err != nil {
			t.Errorf("task returned %v", err)
		}
	}

	// Refused at once: no task holds the stream for it.
	if _, err := live.Export(ctx, "", -1); !errors.Is(err, service.ErrNoSnapshotDir) {
		t.Fatalf("export without a directory: %v, want ErrNoSnapshotDir", err)
	}
	select {
	case <-o.tasks:
		t.Fatal("an export without a directory submitted a task")
	default:
	}
	o.flushErr = errors.New("broker gone")
	go serveOne()
	if _, err := live.Export(ctx, filepath.Join(t.TempDir(), "x.snap"), -1); !errors.Is(err, o.flushErr) {
		t.Fatalf("export with a failing flush: %v", err)
	}

	// Nobody serves this one: it is queued, then abandoned.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := live.Export(short, filepath.Join(t.TempDir(), "y.snap"), -1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("unserved export: %v", err)
	}
	closed := make(chan error)
	go func() { closed <- live.Close() }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close waits for an abandoned request")
	}
	serveOne() // the abandoned task runs late and does nothing
	if _, err := live.Export(ctx, "", -1); !errors.Is(err, service.ErrSnapshotsClosed) {
		t.Fatalf("export after Close: %v", err)
	}
	if _, err := service.NewLiveSnapshots(nil, service.LiveSnapshotOptions{}); err == nil {
		t.Fatal("NewLiveSnapshots without a model owner succeeded")
	}
}

// serveLive serves the live snapshots of a model that learned events
// events of a stream, with opts, until the test ends.
func serveLive(t *testing.T, events int, opts service.LiveSnapshotOptions) (*httptest.Server, *service.LiveSnapshots) {
	t.Helper()
	o := &owner{m: onlinetest.New(t, onlinetest.SmallConfig(online.ModeBinary)), tasks: make(chan service.Task)}
	onlinetest.Step(t, o.m, onlinetest.Stream(events, 12))
	o.next = int64(events)
	live, err := service.NewLiveSnapshots(o, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { defer close(stopped); o.run(ctx, t, nil, 1, nil) }()
	srv := httptest.NewServer(live)
	t.Cleanup(func() { srv.Close(); live.Close(); cancel(); <-stopped })
	return srv, live
}

// TestLiveSnapshotHTTP: POST writes a snapshot into the directory and answers its
// description; GET streams one and leaves nothing behind; other methods
// are refused.
func TestLiveSnapshotHTTP(t *testing.T) {
	dir := t.TempDir()
	srv, _ := serveLive(t, 800, service.LiveSnapshotOptions{Dir: dir})

	resp, err := http.Post(srv.URL+"/snapshot", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	var res service.SnapshotResult
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("POST: %d %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	if s, err := snapshot.ReadFile(res.Path); err != nil || s.Model.Version() != 800 || filepath.Dir(res.Path) != dir {
		t.Fatalf("POSTed snapshot %s: %v", res.Path, err)
	}

	resp, err = http.Get(srv.URL + "/snapshot")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET: %d %v", resp.StatusCode, err)
	}
	s, err := snapshot.Read(bytes.NewReader(body))
	if err != nil || s.Model.Version() != 800 || resp.Header.Get("X-Denoiser-Snapshot-Crc32c") != s.ChecksumHex() {
		t.Fatalf("downloaded snapshot: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("the snapshot directory holds %d entries after a download, want the POSTed one", len(entries))
	}

	req, _ := http.NewRequest(http.MethodPut, srv.URL+"/snapshot", nil)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("PUT: %d", resp.StatusCode)
	}
}

// TestLiveSnapshotHTTPWithoutDir: with no snapshot directory, GET still
// downloads a snapshot (staged in the system's temporary directory, and
// removed), and POST answers 409 with the setting that fixes it.
func TestLiveSnapshotHTTPWithoutDir(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	srv, live := serveLive(t, 400, service.LiveSnapshotOptions{})

	resp, err := http.Get(srv.URL + "/snapshot")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET without a directory: %d %v %q", resp.StatusCode, err, body)
	}
	if s, err := snapshot.Read(bytes.NewReader(body)); err != nil || s.Model.Version() != 400 {
		t.Fatalf("downloaded snapshot: %v", err)
	}
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		t.Fatalf("the temporary directory holds %d entries after a download", len(entries))
	}

	resp, err = http.Post(srv.URL+"/snapshot", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict || !strings.Contains(string(body), "--snapshot-dir") {
		t.Fatalf("POST without a directory: %d %q, want 409 naming --snapshot-dir", resp.StatusCode, body)
	}
	if _, err := live.Export(context.Background(), "", -1); !errors.Is(err, service.ErrNoSnapshotDir) {
		t.Fatalf("Export without a path or a directory: %v, want ErrNoSnapshotDir", err)
	}
}
