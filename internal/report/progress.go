package report

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// Progress redraws a one-line progress bar on a terminal until Stop.
type Progress struct {
	w      io.Writer
	total  int64
	read   func() int64
	events func() uint64
	start  time.Time

	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

// StartProgress draws progress to w every interval (default 200 ms when
// zero) from read (bytes consumed of total; total < 1 hides the bar) and
// events (records scored so far). Both are called from the display's own
// goroutine and must be safe for that.
func StartProgress(w io.Writer, interval time.Duration, total int64, read func() int64, events func() uint64) *Progress {
	if interval <= 0 {
		interval = 200 * time.Millisecond
	}
	p := &Progress{w: w, total: total, read: read, events: events, start: time.Now(), stop: make(chan struct{})}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				p.draw()
			case <-p.stop:
				return
			}
		}
	}()
	return p
}

// Stop draws the final state, ends the line and waits for the display
// goroutine. It is idempotent.
func (p *Progress) Stop() {
	p.once.Do(func() {
		close(p.stop)
		p.wg.Wait()
		p.draw()
		fmt.Fprintln(p.w)
	})
}

func (p *Progress) draw() {
	const width = 30
	n := p.events()
	secs := time.Since(p.start).Seconds()
	rate := 0.0
	if secs > 0 {
		rate = float64(n) / secs
	}
	line := fmt.Sprintf("%d events, %.0f/s, %.0f s", n, rate, secs)
	if p.total > 0 {
		frac := min(1, float64(p.read())/float64(p.total))
		fill := int(frac * width)
		line = fmt.Sprintf("[%s%s] %5.1f%% %s", strings.Repeat("=", fill), strings.Repeat(" ", width-fill), 100*frac, line)
	}
	fmt.Fprintf(p.w, "\r%s\x1b[K", line)
}
