package report

import (
	"context"
	"sync/atomic"

	"denoiser/consumer"
	"denoiser/online"
)

var _ consumer.Sink = (*Collector)(nil)

// Collector is a consumer.Sink that records, for every scored event, its
// ground truth under a Truth mode and its scores, then passes the record on
// to the next sink. Its fields are owned by the goroutine that calls Write
// (the loop's writer); read them after the loop has returned.
type Collector struct {
	truth Truth
	next  consumer.Sink

	scored atomic.Uint64 // read by progress displays while running

	distilled    uint64
	sources      [online.NumWeightSources]uint64 // scored events per online.WeightSource
	withoutTruth uint64
	noShadow     uint64 // events with truth but no baseline score
	genuine      []bool
	weight       []float64
	pClean       []float64
	reliability  []float64
	negLoss      []float64 // −(baseline loss); valid where hasShadow
	hasShadow    []bool

	counter *Counter
	counts  [len(countBaselines)][]float64 // the counting baselines' scores
}

// NewCollector returns a Collector that passes records on to next (nil: to
// nothing).
func NewCollector(truth Truth, next consumer.Sink) *Collector {
	return &Collector{truth: truth, next: next, counter: NewCounter()}
}

// Write records r and passes it on.
func (c *Collector) Write(ctx context.Context, r *consumer.Result) error {
	c.scored.Add(1)
	if r.Score.Distilled >= 0 {
		c.distilled++
	}
	if int(r.Score.Source) < len(c.sources) {
		c.sources[r.Score.Source]++
	}
	ev := &r.Event
	if c.truth.Mode == TruthNone {
		// Nothing is evaluated: the counting baselines would count for
		// nothing, and their maps grow with every id and pair.
		c.withoutTruth++
		return c.forward(ctx, r)
	}
	counts := c.counter.Observe(ev.User, ev.Item, ev.DwellMS, ev.HasDwell, ev.TS, ev.HasTS)
	if g, ok := c.truth.Genuine(ev); ok {
		for k, v := range counts {
			c.counts[k] = append(c.counts[k], v)
		}
		c.genuine = append(c.genuine, g)
		c.weight = append(c.weight, r.Score.Weight)
		c.pClean = append(c.pClean, r.Score.PClean)
		c.reliability = append(c.reliability, r.Score.Reliability)
		c.negLoss = append(c.negLoss, -r.Shadow.Loss)
		c.hasShadow = append(c.hasShadow, r.HasShadow)
		if !r.HasShadow {
			c.noShadow++
		}
	} else {
		c.withoutTruth++
	}
	return c.forward(ctx, r)
}

// forward passes r on to the next sink.
func (c *Collector) forward(ctx context.Context, r *consumer.Result) error {
	if c.next == nil {
		return nil
	}
	return c.next.Write(ctx, r)
}

// Flush flushes the next sink.
func (c *Collector) Flush(ctx context.Context) error {
	if c.next == nil {
		return nil
	}
	return c.next.Flush(ctx)
}

// Scored is the number of records written so far; safe from any goroutine.
func (c *Collector) Scored() uint64 { return c.scored.Load() }
