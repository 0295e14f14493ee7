package service

import (
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"denoiser/consumer"
	"denoiser/online"
)

// metrics are the service's Prometheus metrics, all named denoiser_*. The
// per-record ones are updated on the model goroutine; the model's summary,
// the consumer lag, the checkpoint age and readiness are read at scrape
// time.
type metrics struct {
	consumed     prometheus.Counter
	scored       prometheus.Counter
	emitted      prometheus.Counter
	already      prometheus.Counter
	deadLettered map[consumer.Reason]prometheus.Counter
	skipped      map[consumer.SkipReason]prometheus.Counter
	numerical    prometheus.Counter
	step         prometheus.Histogram
	reliability  prometheus.Histogram
	weight       prometheus.Histogram
	// weightSources counts scored events by what formed their weight
	// (online.Score.Source), one counter per source.
	weightSources *prometheus.CounterVec
	bySource      [online.NumWeightSources]prometheus.Counter

	checkpoints        prometheus.Counter
	checkpointFailures prometheus.Counter
	handovers          *prometheus.CounterVec
	checkpointDuration prometheus.Histogram
	checkpointPause    prometheus.Histogram
	checkpointBytes    prometheus.Gauge
	checkpointBase     prometheus.Gauge
	checkpointDeltas   prometheus.Gauge
	checkpointBases    prometheus.Counter
	checkpointWritten  prometheus.Counter
	changelogSaves     *prometheus.CounterVec
	changelogRestores  *prometheus.CounterVec
	changelogEvictions prometheus.Counter
	shared             *prometheus.CounterVec
	sharedWaits        *prometheus.CounterVec
	sharedWindows      *prometheus.CounterVec
	sharedWaitSeconds  prometheus.Counter

	mu struct {
		sync.Mutex
		summary    *online.Summary
		lastSaved  time.Time // last successful checkpoint
		restoredAt time.Time
		ready      func() (bool, string) // nil: not ready (the service is being built)
	}
}

// lagReader reports the input partitions (the KafkaSource).
type lagReader interface {
	Lag() []consumer.PartitionLag
}

func newMetrics(reg prometheus.Registerer, src lagReader) (*metrics, error) {
	m := &metrics{
		consumed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "denoiser_events_consumed_total",
			Help: "Input records processed: scored, dead-lettered or skipped (the three counters add up to this one).",
		}),
		already: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "denoiser_records_already_emitted_total",
			Help: "Records processed (the model learned from them) but not written again: a previous owner of their partition emitted them and crashed before it committed (found by reading the output topics back on assignment). They are counted in denoiser_events_scored_total or denoiser_events_dead_lettered_total too.",
		}),
		scored: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "denoiser_events_scored_total",
			Help: "Events scored by the model and handed to the output writer.",
		}),
		emitted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "denoiser_events_emitted_total",
			Help: "Scored events acknowledged by the output broker (re-emits after a restart included).",
		}),
		numerical: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "denoiser_numerical_errors_total",
			Help: "Events whose model update was discarded for a numerical failure (the score is still emitted).",
		}),
		step: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "denoiser_processing_seconds",
			Help:    "Processing latency of one event in the model (score, then learn); one event in 8 is timed.",
			Buckets: prometheus.ExponentialBuckets(1e-6, 2, 16), // 1µs .. 33ms
		}),
		reliability: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "denoiser_reliability",
			Help:    "Reliability (GMM weight) of scored events.",
			Buckets: prometheus.LinearBuckets(0.1, 0.1, 10),
		}),
		weight: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "denoiser_weight",
			Help:    "Weight (the score to train on: p_clean with the evidence of dwell and event type, or of the gap) of scored events.",
			Buckets: prometheus.LinearBuckets(0.1, 0.1, 10),
		}),
		weightSources: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "denoiser_weight_sources_total",
			Help: "Scored events by what formed their weight: p_clean alone, the context's learned evidence, or the dwell, type or gap instrument.",
		}, []string{"source"}),
		checkpoints: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "denoiser_checkpoints_total",
			Help: "Checkpoints committed to the state store.",
		}),
		checkpointFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "denoiser_checkpoint_failures_total",
			Help: "Checkpoints that failed to commit.",
		}),
		handovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "denoiser_handovers_total",
			Help: "Rebalances that took the partitions away, by outcome: ok (output flushed, checkpoint saved, offsets committed before the partitions went) or failed (the next owners start at the last commit and emit again what came after it).",
		}, []string{"outcome"}),
		checkpointDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "denoiser_checkpoint_duration_seconds",
			Help:    "Time to commit a checkpoint to the state store (beside the model loop).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14), // 1ms .. 8s
		}),
		checkpointPause: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "denoiser_checkpoint_pause_seconds",
			Help:    "Time the model loop paused for a checkpoint: output flush plus the copy of what changed in the model.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14), // 0.5ms .. 4s
		}),
		checkpointBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "denoiser_checkpoint_bytes",
			Help: "Model bytes the last checkpoint wrote: the whole model (a new base) or what changed since the checkpoint before (a delta).",
		}),
		checkpointBase: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "denoiser_checkpoint_base_bytes",
			Help: "Size of the whole serialised model at the last base checkpoint, which the deltas since build on.",
		}),
		checkpointDeltas: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "denoiser_checkpoint_deltas",
			Help: "Deltas the last checkpoint holds after its base (0: it wrote the whole model).",
		}),
		checkpointBases: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "denoiser_checkpoint_bases_total",
			Help: "Checkpoints that wrote the whole model (a new base) rather than a delta.",
		}),
		checkpointWritten: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "denoiser_checkpoint_written_bytes_total",
			Help: "Model bytes the committed checkpoints wrote to the state store, bases and deltas together (the store's write load; Badger's own compactions and collections come on top).",
		}),
		changelogSaves: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "denoiser_changelog_saves_total",
			Help: "Partition checkpoints written to the changelog topic (state_layout partition), by kind (base: the whole partition model; delta: what changed) and outcome (ok, failed: that partition's offset is not committed, and its next save is a base).",
		}, []string{"kind", "outcome"}),
		changelogRestores: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "denoiser_changelog_restores_total",
			Help: "Partitions assigned to this member, by where their state came from: changelog (newer than this member's own, read from the changelog topic), local (this member's own was as new), kept (owned in the previous generation too: not read), failed (the changelog could not be read or decoded: this member's own state stays).",
		}, []string{"source"}),
		changelogEvictions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "denoiser_changelog_evictions_total",
			Help: "Partition models this member dropped after a rebalance took their partition away, the changelog holding their state (state_layout partition): memory holds the partitions a member owns, and those whose last changelog save failed.",
		}),
		shared: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "denoiser_shared_deltas_total",
			Help: "Deltas of the shared parameters (item rows) exchanged through the shared topic (state_layout partition), by outcome: published (queued for the topic), dropped (not published: the send queue was full or the delta could not be encoded), send_failed, merged (into one of this member's partition models), deferred (a merge point skipped: the send queue was full, so it could not be recorded; its deltas wait for the next), overlapping (skipped: it starts before what the model merged of that partition, after a restore), refused (not finite), unreadable (not a delta), abandoned (a delta whose chunks stopped coming, its writer having failed or crashed between two: dropped from memory once 64 MiB of later chunks have been read), read_failed (the topic could not be opened or read; retried).",
		}, []string{"outcome"}),
		sharedWindows: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "denoiser_shared_windows_total",
			Help: "Restored partition models that step again records a previous owner emitted after the checkpoint (state_layout partition, sharing on), by outcome: replayed (with the merges that owner recorded there, at the same offsets), skipped (something was missing, the log says what: the model merges freely there, and a replay may not reproduce those records).",
		}, []string{"outcome"}),
		sharedWaits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "denoiser_shared_waits_total",
			Help: "Publications to the shared topic after which this member waited for the topic to hand them back before stepping on (sharing.wait), by outcome: read_back (within sharing.wait), expired (not read back within it), skipped (not waited for: the topic has handed back nothing of this member's since a wait last expired).",
		}, []string{"outcome"}),
		sharedWaitSeconds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "denoiser_shared_wait_seconds_total",
			Help: "Time this member spent waiting for its publications to be read back from the shared topic (sharing.wait), during which its models do not step.",
		}),
		deadLettered: map[consumer.Reason]prometheus.Counter{},
		skipped:      map[consumer.SkipReason]prometheus.Counter{},
	}
	sk := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "denoiser_records_skipped_total",
		Help: "Input records with nothing to score, by reason: empty, blank (white space only) or tombstone (null value).",
	}, []string{"reason"})
	for _, r := range consumer.SkipReasons() {
		m.skipped[r] = sk.WithLabelValues(string(r))
	}
	dl := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "denoiser_events_dead_lettered_total",
		Help: "Input records sent to the dead-letter topic, by reason.",
	}, []string{"reason"})
	for _, r := range consumer.Reasons() {
		m.deadLettered[r] = dl.WithLabelValues(string(r))
	}
	// Every outcome starts at 0, so that increase() and the alerts see the
	// first failure rather than a series that appears with it.
	for _, o := range []string{"ok", "failed"} {
		m.handovers.WithLabelValues(o)
		for _, kind := range []string{"base", "delta"} {
			m.changelogSaves.WithLabelValues(kind, o)
		}
	}
	for _, src := range []string{"changelog", "local", "kept", "failed"} {
		m.changelogRestores.WithLabelValues(src)
	}
	for _, src := range online.WeightSources() {
		m.bySource[src] = m.weightSources.WithLabelValues(src.String())
	}
	for _, o := range []string{"published", "dropped", "send_failed", "merged", "deferred", "overlapping", "refused", "unreadable", "abandoned", "read_failed"} {
		m.shared.WithLabelValues(o)
	}
	for _, o := range []string{"read_back", "expired", "skipped"} {
		m.sharedWaits.WithLabelValues(o)
	}
	for _, o := range []string{"replayed", "skipped"} {
		m.sharedWindows.WithLabelValues(o)
	}
	for _, c := range []prometheus.Collector{
		m.consumed, m.scored, m.emitted, m.already, m.numerical, dl, sk, m.step, m.reliability, m.weight, m.weightSources,
		m.checkpoints, m.checkpointFailures, m.handovers, m.checkpointDuration, m.checkpointPause, m.checkpointBytes,
		m.checkpointBase, m.checkpointDeltas, m.checkpointBases, m.checkpointWritten, m.changelogSaves, m.changelogRestores, m.changelogEvictions,
		m.shared, m.sharedWaits, m.sharedWindows, m.sharedWaitSeconds, &scrapeCollector{m: m, src: src},
	} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register metrics: %w", err)
		}
	}
	return m, nil
}

// record counts one processed record (model goroutine).
func (m *metrics) record(r *consumer.Result) {
	m.consumed.Inc()
	if r.Emitted {
		m.already.Inc()
	}
	if !r.Scored() {
		if c := m.deadLettered[r.Reason]; c != nil {
			c.Inc()
		}
		return
	}
	m.scored.Inc()
	if r.Err != nil {
		m.numerical.Inc()
	}
	m.reliability.Observe(r.Score.Reliability)
	m.weight.Observe(r.Score.Weight)
	if int(r.Score.Source) < len(m.bySource) && m.bySource[r.Score.Source] != nil { // none for SourceUnknown
		m.bySource[r.Score.Source].Inc()
	}
}

// skip counts one skipped record (model goroutine).
func (m *metrics) skip(reason consumer.SkipReason) {
	m.consumed.Inc()
	m.skipped[reason].Inc()
}

// setSummary publishes the model's summary for the next scrapes.
func (m *metrics) setSummary(s online.Summary) {
	m.mu.Lock()
	m.mu.summary = &s
	m.mu.Unlock()
}

// readiness sets what denoiser_ready reports (Service.Ready).
func (m *metrics) readiness(ready func() (bool, string)) {
	m.mu.Lock()
	m.mu.ready = ready
	m.mu.Unlock()
}

func (m *metrics) saved(at time.Time) {
	m.mu.Lock()
	m.mu.lastSaved = at
	m.mu.Unlock()
}

// scrapeCollector emits what is read at scrape time.
type scrapeCollector struct {
	m   *metrics
	src lagReader
}

var (
	descLag = prometheus.NewDesc("denoiser_consumer_lag",
		"Records in an assigned input partition not yet read: the high watermark of the last fetch minus the next offset.",
		[]string{"topic", "partition"}, nil)
	descNext = prometheus.NewDesc("denoiser_partition_next_offset",
		"Next input offset the model reads, per assigned partition.", []string{"topic", "partition"}, nil)
	descAssigned = prometheus.NewDesc("denoiser_partitions_assigned",
		"Input partitions assigned to this member.", nil, nil)
	descReady = prometheus.NewDesc("denoiser_ready",
		"1 when the service is ready (/readyz answers 200), else 0.", nil, nil)
	descAge = prometheus.NewDesc("denoiser_checkpoint_age_seconds",
		"Seconds since the last committed checkpoint (since the start while there is none).", nil, nil)
	descVersion = prometheus.NewDesc("denoiser_model_events",
		"Events the model has learned from (its version).", nil, nil)
	descUsers = prometheus.NewDesc("denoiser_model_users",
		"Users with a row of their own in the model (resident; without model.max_users and model.admit_after: the distinct users seen).", nil, nil)
	descItems = prometheus.NewDesc("denoiser_model_items",
		"Items with a row of their own in the model (resident; without model.max_items and model.admit_after: the distinct items seen).", nil, nil)
	descCapacity = prometheus.NewDesc("denoiser_model_ids_capacity",
		"The cap on resident ids per side (model.max_users, model.max_items); 0: no cap.", []string{"side"}, nil)
	descAdmitted = prometheus.NewDesc("denoiser_model_ids_admitted_total",
		"Ids given a row of their own, per side: resident plus evicted (restored with the model).", []string{"side"}, nil)
	descEvicted = prometheus.NewDesc("denoiser_model_ids_evicted_total",
		"Ids evicted, the least recently seen, to make room under the cap, per side (restored with the model).", []string{"side"}, nil)
	descCold = prometheus.NewDesc("denoiser_model_cold_events_total",
		"Events whose user (side=user) or item (side=item) was not admitted yet (model.admit_after) and was scored with the shared cold row (restored with the model).", []string{"side"}, nil)
	descShare = prometheus.NewDesc("denoiser_distilled_share",
		"Share of learned events that received a distilled label.", nil, nil)
	descRho = prometheus.NewDesc("denoiser_rho",
		"Current rho of the distillation threshold (1+rho)/2.", nil, nil)
	descPrior = prometheus.NewDesc("denoiser_user_prior_strength",
		"k of the users' priors, in events: 1000 where the users' genuine shares do not differ, the smaller the more a few users send the noise.", nil, nil)
	descItemPrior = prometheus.NewDesc("denoiser_item_prior_strength",
		"k of the items' priors, in events: 1000 where the items' genuine shares do not differ, the smaller the more a few items draw the noise.", nil, nil)
	descBurst = prometheus.NewDesc("denoiser_burst_share",
		"Share of the gaps between a user's clicks in the burst (clicks within seconds of the previous one) that the weight reads as the more often noise; absent where the model finds none.", nil, nil)
	descRefits = prometheus.NewDesc("denoiser_gmm_refits_total",
		"GMM refits of the model (restored with the model).", nil, nil)
	descFitted = prometheus.NewDesc("denoiser_gmm_fitted",
		"1 once the GMM has been fitted.", nil, nil)
	descReliable = prometheus.NewDesc("denoiser_gmm_reliable_component",
		"Index of the reliable GMM component.", nil, nil)
	descWeight = prometheus.NewDesc("denoiser_gmm_component_weight",
		"Mixture weight of a GMM component.", []string{"component"}, nil)
	descMean = prometheus.NewDesc("denoiser_gmm_component_mean",
		"Mean of a GMM component, per reliability feature (score = f_ỹ(x), cooc = log(1+c_ui)).",
		[]string{"component", "feature"}, nil)
	descTransition = prometheus.NewDesc("denoiser_mean_transition",
		"Mean estimated transition matrix T̂ over the last refit period: P(observed | clean).",
		[]string{"clean", "observed"}, nil)
)

func (c *scrapeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLag, descNext, descAssigned, descReady, descAge, descVersion, descUsers, descItems,
		descCapacity, descAdmitted, descEvicted, descCold, descShare, descRho, descPrior, descItemPrior, descBurst, descRefits, descFitted, descReliable, descWeight, descMean, descTransition} {
		ch <- d
	}
}

func (c *scrapeCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	if c.src != nil {
		lags := c.src.Lag()
		gauge(descAssigned, float64(len(lags)))
		for _, l := range lags {
			p := strconv.Itoa(l.Partition)
			if lag := l.Lag(); lag >= 0 {
				gauge(descLag, float64(lag), l.Topic, p)
			}
			if l.Next >= 0 {
				gauge(descNext, float64(l.Next), l.Topic, p)
			}
		}
	}
	c.m.mu.Lock()
	s, last, start, ready := c.m.mu.summary, c.m.mu.lastSaved, c.m.mu.restoredAt, c.m.mu.ready
	c.m.mu.Unlock()
	isReady := 0.0
	if ready != nil {
		if ok, _ := ready(); ok {
			isReady = 1
		}
	}
	gauge(descReady, isReady)
	if last.IsZero() {
		last = start
	}
	if !last.IsZero() {
		gauge(descAge, time.Since(last).Seconds())
	}
	if s == nil {
		return
	}
	gauge(descVersion, float64(s.Events))
	gauge(descUsers, float64(s.Users))
	gauge(descItems, float64(s.Items))
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	for _, side := range []struct {
		name               string
		capacity, resident int
		evicted, cold      uint64
	}{
		{"user", s.MaxUsers, s.Users, s.UsersEvicted, s.ColdUserEvents},
		{"item", s.MaxItems, s.Items, s.ItemsEvicted, s.ColdItemEvents},
	} {
		gauge(descCapacity, float64(side.capacity), side.name)
		counter(descAdmitted, uint64(side.resident)+side.evicted, side.name)
		counter(descEvicted, side.evicted, side.name)
		counter(descCold, side.cold, side.name)
	}
	gauge(descShare, s.DistilledShare)
	gauge(descRho, s.Rho)
	if s.UserPriorStrength > 0 {
		gauge(descPrior, s.UserPriorStrength)
	}
	if s.ItemPriorStrength > 0 {
		gauge(descItemPrior, s.ItemPriorStrength)
	}
	if s.Burst != nil && !s.Burst.Disputed {
		gauge(descBurst, s.Burst.Share)
	}
	counter(descRefits, s.Refits)
	fitted := 0.0
	if s.GMM.Fitted {
		fitted = 1
	}
	gauge(descFitted, fitted)
	gauge(descReliable, float64(s.GMM.Reliable))
	for i, comp := range s.GMM.Components {
		ci := strconv.Itoa(i)
		gauge(descWeight, comp.Weight, ci)
		gauge(descMean, comp.Mean[0], ci, "score")
		gauge(descMean, comp.Mean[1], ci, "cooc")
	}
	for i, row := range s.MeanTransition {
		for j, v := range row {
			gauge(descTransition, v, strconv.Itoa(i), strconv.Itoa(j))
		}
	}
}

// timedSet is what the loop steps: the member's models, partition p's
// through For (consumer.Partitioned), each timed by its own timedModel so
// that the models of different partitions may step at the same time (the
// loop steps partitions that share a model together). Step is partition
// 0's; the loop does not call it. For runs on the model goroutine, once
// per partition per batch, so that a model the set replaced between two
// batches (online.Set.Replace, a restore) is the one stepped next.
type timedSet struct {
	set    *online.Set
	h      prometheus.Histogram
	models map[int32]*timedModel          // by key
	track  func(k int32, m *online.Model) // if set, told of every model before it first steps here
}

func newTimedSet(set *online.Set, h prometheus.Histogram) *timedSet {
	return &timedSet{set: set, h: h, models: map[int32]*timedModel{}}
}

func (t *timedSet) For(p int32) consumer.Model {
	k := t.set.Key(p)
	if tm := t.models[k]; tm != nil && tm.m == t.set.Model(k) {
		return tm
	}
	m, err := t.set.For(p)
	if err != nil {
		// Not expected (the set's configuration and template were read
		// and checked already): every event of the partition is refused
		// with the reason, never dropped.
		return refuseModel{fmt.Errorf("%w: no model for partition %d: %w", online.ErrInvalidEvent, p, err)}
	}
	if t.track != nil {
		t.track(k, m)
	}
	tm := &timedModel{m: m, h: t.h}
	t.models[k] = tm
	return tm
}

// forget drops what the cache holds of partition p, whose model left
// the set.
func (t *timedSet) forget(p int32) { delete(t.models, t.set.Key(p)) }

func (t *timedSet) Step(ev online.Event, sc *online.Score) error { return t.For(0).Step(ev, sc) }

type refuseModel struct{ err error }

func (r refuseModel) Step(online.Event, *online.Score) error { return r.err }

// timedModel measures Step on one event in stepSample, so that reading
// the clock costs the loop next to nothing.
type timedModel struct {
	m *online.Model
	h prometheus.Histogram
	n uint64
}

const stepSample = 8

func (t *timedModel) Step(ev online.Event, sc *online.Score) error {
	t.n++
	if t.n%stepSample != 0 {
		return t.m.Step(ev, sc)
	}
	start := time.Now()
	err := t.m.Step(ev, sc)
	t.h.Observe(time.Since(start).Seconds())
	return err
}
