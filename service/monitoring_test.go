package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"denoiser/consumer"
	"denoiser/internal/kafkatest"
)

// The monitoring files of docs/monitoring, from this package's directory.
const (
	dashboardFile = "../docs/monitoring/grafana-dashboard.json"
	alertsFile    = "../docs/monitoring/alerts.yml"
)

// TestLagAndCheckpointAgeUnderBacklog: while the model loop is held, a
// backlog builds up in the input partition and /metrics shows it as
// denoiser_consumer_lag (the high watermark of the last fetch minus the
// next offset), and denoiser_checkpoint_age_seconds grows; once the loop
// goes on, the lag falls to 0 and a checkpoint resets the age.
func TestLagAndCheckpointAgeUnderBacklog(t *testing.T) {
	b := kafkatest.New(t)
	in := b.Topic(t, "backlog", 1)
	cfg := testConfig(t, b, in)
	r := start(t, cfg)
	url := "http://" + r.svc.HTTPAddr() + "/metrics"
	lag := `denoiser_consumer_lag{partition="0",topic="` + in + `"}`

	first := events(t, 200, 5)
	b.Produce(t, in, keyed(first)...)
	waitMetrics(t, url, 30*time.Second, "the first records read", func(m map[string]float64) bool {
		return m["denoiser_events_consumed_total"] == float64(len(first)) && m[lag] == 0 && m["denoiser_ready"] == 1
	})

	// Hold the model loop: a task that waits.
	held, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	letGo := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(letGo)
	err := r.svc.Submit(context.Background(), func(ctx context.Context, _ consumer.Flusher) error {
		close(held)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Submit: %v", err)
	}
	<-held
	heldAt := time.Now()

	backlog := events(t, 10000, 6)
	b.Produce(t, in, keyed(backlog)...)
	// What the reader has taken ahead of the model (kafka.fetch_buffer,
	// buffer) is counted as read: the lag is the rest.
	m := waitMetrics(t, url, 30*time.Second, "a backlog", func(m map[string]float64) bool {
		return m[lag] >= 5000 && m["denoiser_checkpoint_age_seconds"] >= 1
	})
	if age := m["denoiser_checkpoint_age_seconds"]; age > time.Since(heldAt).Seconds()+1 {
		t.Errorf("checkpoint age %.1fs while the loop is held for %.1fs: the last checkpoint is older than the hold", age, time.Since(heldAt).Seconds())
	}
	if m[lag] > float64(len(backlog)) {
		t.Errorf("lag %v > the %d records produced", m[lag], len(backlog))
	}

	letGo()
	total := float64(len(first) + len(backlog))
	waitMetrics(t, url, time.Minute, "the backlog read and checkpointed", func(m map[string]float64) bool {
		return m["denoiser_events_consumed_total"] == total && m[lag] == 0 &&
			m["denoiser_checkpoint_age_seconds"] < 1 && m["denoiser_checkpoints_total"] >= 1
	})
}

// TestMonitoringMatchesMetrics scrapes a running service's /metrics, runs
// promtool check metrics on it (when promtool is on PATH) and checks that
// every denoiser_* metric the Grafana dashboard and the alert rules query
// exists in it: a panel or an alert on a metric that is not (or no longer)
// exported fails here.
func TestMonitoringMatchesMetrics(t *testing.T) {
	b := kafkatest.New(t)
	in := b.Topic(t, "monitoring", 2)
	cfg := testConfig(t, b, in)
	lines := events(t, 1000, 7)
	lines = append(lines, []byte("not json"))
	b.Produce(t, in, keyed(lines)...)
	r := start(t, cfg)
	url := "http://" + r.svc.HTTPAddr() + "/metrics"
	waitMetrics(t, url, time.Minute, "every record read, ready", func(m map[string]float64) bool {
		return m["denoiser_events_consumed_total"] == float64(len(lines)) && m["denoiser_ready"] == 1 && m["denoiser_checkpoints_total"] >= 1
	})
	_, body := httpGet(t, url)

	if promtool, err := exec.LookPath("promtool"); err != nil {
		t.Log("promtool not on PATH: promtool check metrics skipped (apt-get install prometheus)")
	} else {
		cmd := exec.Command(promtool, "check", "metrics")
		cmd.Stdin = strings.NewReader(body)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool check metrics: %v\n%s", err, out)
		}
	}

	exported := exportedNames(body)
	queries := dashboardQueries(t, dashboardFile)
	queries = append(queries, alertQueries(t, alertsFile)...)
	used := map[string][]string{} // metric name -> where
	for _, q := range queries {
		for _, name := range metricNameRE.FindAllString(q.expr, -1) {
			used[name] = append(used[name], q.where)
		}
	}
	for _, must := range []string{"denoiser_consumer_lag", "denoiser_checkpoint_age_seconds", "denoiser_ready"} {
		if used[must] == nil {
			t.Errorf("neither the dashboard nor the alerts query %s", must)
		}
	}
	for name, where := range used {
		if !exported[name] {
			t.Errorf("%s is queried but not exported by the service (%s)", name, strings.Join(where, "; "))
		}
	}

	if promtool, err := exec.LookPath("promtool"); err == nil {
		checkPromQL(t, promtool, queries)
	}
}

// TestIDMetrics: with caps and admission, /metrics shows per side the
// cap, the resident ids (at most the cap), the ids evicted and admitted
// (admitted = resident + evicted) and the events scored with the cold
// row.
func TestIDMetrics(t *testing.T) {
	b := kafkatest.New(t)
	in := b.Topic(t, "ids", 1)
	cfg := testConfig(t, b, in)
	cfg.Model.MaxUsers, cfg.Model.MaxItems, cfg.Model.AdmitAfter, cfg.Model.AdmitSketchWidth = 10, 40, 2, 1024
	lines := events(t, 2000, 8)
	b.Produce(t, in, keyed(lines)...)
	r := start(t, cfg)
	url := "http://" + r.svc.HTTPAddr() + "/metrics"
	m := waitMetrics(t, url, time.Minute, "every record learned from", func(m map[string]float64) bool {
		return m["denoiser_model_events"] == float64(len(lines))
	})
	for _, side := range []struct {
		name, resident string
		capacity       float64
	}{{"user", "denoiser_model_users", 10}, {"item", "denoiser_model_items", 40}} {
		label := `{side="` + side.name + `"}`
		capacity, resident := m["denoiser_model_ids_capacity"+label], m[side.resident]
		admitted, evicted, cold := m["denoiser_model_ids_admitted_total"+label], m["denoiser_model_ids_evicted_total"+label], m["denoiser_model_cold_events_total"+label]
		t.Logf("%s: cap %v, resident %v, admitted %v, evicted %v, cold events %v", side.name, capacity, resident, admitted, evicted, cold)
		// admitted is exported as resident + evicted (metrics.go), so only
		// its presence is checked here.
		if capacity != side.capacity || resident != side.capacity || evicted <= 0 || admitted <= 0 || cold <= 0 {
			t.Errorf("%s: cap %v, resident %v, admitted %v, evicted %v, cold events %v; want cap = resident = %v, some admitted, evicted and cold",
				side.name, capacity, resident, admitted, evicted, cold, side.capacity)
		}
	}
}

// metricNameRE finds the service's metric names in a PromQL expression.
var metricNameRE = regexp.MustCompile(`\bdenoiser_[a-zA-Z0-9_]+`)

// exportedNames returns the metric names of an exposition, histogram and
// summary series (_bucket, _sum, _count) included.
func exportedNames(body string) map[string]bool {
	names := map[string]bool{}
	for _, l := range strings.Split(body, "\n") {
		f := strings.Fields(l)
		if len(f) != 4 || f[0] != "#" || f[1] != "TYPE" {
			continue
		}
		names[f[2]] = true
		switch f[3] {
		case "histogram":
			names[f[2]+"_bucket"] = true
			fallthrough
		case "summary":
			names[f[2]+"_sum"], names[f[2]+"_count"] = true, true
		}
	}
	return names
}

// query is one PromQL expression of the dashboard or the alerts.
type query struct {
	where string // "dashboard panel \"...\"", "alert X"
	expr  string
}

// dashboardQueries returns the expressions of every panel target and
// every query variable of a Grafana dashboard.
func dashboardQueries(t *testing.T, file string) []query {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	type target struct {
		Expr string `json:"expr"`
	}
	type panel struct {
		Title   string   `json:"title"`
		Type    string   `json:"type"`
		Targets []target `json:"targets"`
		Panels  []panel  `json:"panels"` // a collapsed row's
	}
	var dash struct {
		Panels     []panel `json:"panels"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	var qs []query
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if p.Type != "row" && len(p.Targets) == 0 {
				t.Errorf("%s: panel %q has no query", file, p.Title)
			}
			for _, tg := range p.Targets {
				if strings.TrimSpace(tg.Expr) == "" {
					t.Errorf("%s: panel %q has a target without expr", file, p.Title)
				}
				qs = append(qs, query{where: fmt.Sprintf("dashboard panel %q", p.Title), expr: tg.Expr})
			}
			walk(p.Panels)
		}
	}
	walk(dash.Panels)
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			if err := json.Unmarshal(v.Query, &q.Query); err != nil {
				t.Fatalf("%s: variable %s: query: %v", file, v.Name, err)
			}
		}
		qs = append(qs, query{where: "dashboard variable " + v.Name, expr: q.Query})
	}
	if len(qs) == 0 {
		t.Fatalf("%s: no queries found", file)
	}
	return qs
}

// alertQueries returns the expression of every rule of a Prometheus rule
// file.
func alertQueries(t *testing.T, file string) []query {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert  string `yaml:"alert"`
				Record string `yaml:"record"`
				Expr   string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	var qs []query
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			qs = append(qs, query{where: "alert " + r.Alert + r.Record, expr: r.Expr})
		}
	}
	if len(qs) == 0 {
		t.Fatalf("%s: no rules found", file)
	}
	return qs
}

// checkPromQL has promtool parse the dashboard's expressions (Grafana's
// variables replaced by values), written as recording rules: a panel whose
// query does not parse fails here.
func checkPromQL(t *testing.T, promtool string, qs []query) {
	t.Helper()
	vars := strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h", "$instance", ".*")
	type rule struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	var rules []rule
	for i, q := range qs {
		if !strings.HasPrefix(q.where, "dashboard panel") {
			continue // alerts: promtool check rules (make check-monitoring); variables: label_values is Grafana's
		}
		rules = append(rules, rule{Record: fmt.Sprintf("dashboard:query_%d", i), Expr: vars.Replace(q.expr)})
	}
	doc, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	if err := os.WriteFile(file, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "rules", file).CombinedOutput(); err != nil {
		t.Errorf("the dashboard's queries do not parse: promtool check rules: %v\n%s", err, out)
	}
}

// waitMetrics scrapes url until ok holds for its samples (series as
// written in the exposition, e.g. `name{a="x"}`), and returns them.
func waitMetrics(t *testing.T, url string, timeout time.Duration, what string, ok func(map[string]float64) bool) map[string]float64 {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		code, body := httpGet(t, url)
		m, err := samples(body)
		if code == http.StatusOK && err == nil && ok(m) {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: /metrics = %d, %v:\n%s", what, code, err,
				grepLines(body, "denoiser_consumer_lag", "denoiser_checkpoint", "denoiser_events_consumed", "denoiser_ready", "denoiser_shared"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// samples parses the sample lines of an exposition.
func samples(body string) (map[string]float64, error) {
	m := map[string]float64{}
	var errs []error
	for _, l := range strings.Split(body, "\n") {
		if l == "" || l[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		if i < 0 {
			errs = append(errs, fmt.Errorf("sample line %q", l))
			continue
		}
		v, err := strconv.ParseFloat(l[i+1:], 64) // NaN, +Inf and -Inf included
		if err != nil {
			errs = append(errs, fmt.Errorf("sample line %q: %w", l, err))
			continue
		}
		m[l[:i]] = v
	}
	return m, errors.Join(errs...)
}
