package snapshot

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"text/tabwriter"
	"time"

	"denoiser/online"
)

// WriteText writes r as the human summary of `denoiser snapshot inspect`.
func (r *Report) WriteText(w io.Writer) error {
	t := &text{w: w}
	s := &r.Model
	t.block(func(p printer) {
		if r.File != "" {
			p("file\t%s", r.File)
		}
		p("format\tsnapshot v%d, model encoding v%d, %s (model %s)", r.FormatVersion, r.ModelEncoding, size(r.Bytes), size(r.ModelBytes))
		p("crc32c\t%s (whole file)", r.Checksum)
		p("origin\t%s", origin(r.Meta))
		p("model\tversion %d (events learned)", r.ModelVersion)
		p("counts\tusers %d  items %d  distilled %d (%.1f%%)  refits %d  numerical errors %d",
			s.Users, s.Items, s.Distilled, 100*s.DistilledShare, s.Refits, s.NumericalErrors)
		p("shape\tK=%d  d=%d  rho=%.4g", r.K, r.Dim, s.Rho)
	})
	t.section("config", func(p printer) {
		var line []string
		width := 0
		for _, kv := range configPairs(r.Config) {
			if width > 0 && width+len(kv) > 90 {
				p("%s", strings.Join(line, "  "))
				line, width = line[:0], 0
			}
			line = append(line, kv)
			width += len(kv) + 2
		}
		p("%s", strings.Join(line, "  "))
	})
	t.section("positions", func(p printer) {
		if len(r.Positions) == 0 {
			p("none")
			return
		}
		p("TOPIC\tPARTITION\tNEXT")
		for _, ps := range r.Positions {
			p("%s\t%d\t%d", ps.Topic, ps.Partition, ps.Offset)
		}
	})
	t.section("mean T̂ (row: clean class, column: observed class)", func(p printer) { matrix(p, s.MeanTransition) })
	t.section("GMM over (score, log1p(c_ui))", func(p printer) { gmmTable(p, s.GMM) })
	t.section("embedding norms (L2)", func(p printer) {
		p("\tCOUNT\tMIN\tP50\tMEAN\tP90\tP99\tMAX")
		for _, row := range []struct {
			name string
			n    NormStats
		}{{"users", r.Norms.Users}, {"items", r.Norms.Items}} {
			n := row.n
			p("%s\t%d\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f", row.name, n.Count, n.Min, n.P50, n.Mean, n.P90, n.P99, n.Max)
		}
	})
	if t.err != nil {
		return fmt.Errorf("write report: %w", t.err)
	}
	return nil
}

// WriteText writes d as the human summary of `denoiser snapshot diff`.
func (d *DiffReport) WriteText(w io.Writer) error {
	t := &text{w: w}
	t.block(func(p printer) {
		p("A\t%s", d.A)
		p("B\t%s", d.B)
	})
	t.section("counts", func(p printer) {
		p("\tA\tB\tB-A")
		for _, c := range []struct {
			name string
			c    Count
		}{
			{"model version", d.ModelVersion}, {"events", d.Events}, {"users", d.Users}, {"items", d.Items},
			{"distilled", d.Distilled}, {"refits", d.Refits}, {"numerical errors", d.NumErrors},
		} {
			p("%s\t%d\t%d\t%+d", c.name, c.c.A, c.c.B, c.c.Delta)
		}
		p("rho\t%.4g\t%.4g\t%+.4g", d.Rho[0], d.Rho[1], d.Rho[1]-d.Rho[0])
	})
	t.section("config", func(p printer) {
		if len(d.ConfigChanges) == 0 {
			p("unchanged")
			return
		}
		p("FIELD\tA\tB")
		for _, c := range d.ConfigChanges {
			p("%s\t%s\t%s", c.Field, c.A, c.B)
		}
	})
	t.section("positions", func(p printer) {
		if len(d.Positions) == 0 {
			p("none")
			return
		}
		p("TOPIC\tPARTITION\tA\tB\tB-A")
		for _, c := range d.Positions {
			delta := "-"
			if c.A >= 0 && c.B >= 0 {
				delta = fmt.Sprintf("%+d", c.B-c.A)
			}
			p("%s\t%d\t%s\t%s\t%s", c.Topic, c.Partition, offset(c.A), offset(c.B), delta)
		}
	})
	if d.MeanT == nil {
		t.section("mean T̂", func(p printer) { p("not comparable (K differs)") })
	} else {
		t.section("mean T̂ of A", func(p printer) { matrix(p, d.MeanT.A) })
		t.section("mean T̂ of B", func(p printer) { matrix(p, d.MeanT.B) })
		t.section(fmt.Sprintf("mean T̂ B-A (max |B-A| = %.4g)", d.MeanT.MaxAbsDelta), func(p printer) { matrix(p, d.MeanT.Delta) })
	}
	t.section("GMM of A", func(p printer) { gmmTable(p, d.GMM.A) })
	t.section(fmt.Sprintf("GMM of B (max component mean shift = %.4g)", d.GMM.MaxMeanShift), func(p printer) { gmmTable(p, d.GMM.B) })
	t.section("embedding drift (L2 distance of the same id in A and B)", func(p printer) {
		p("\tCOMMON\tONLY A\tONLY B\tMEAN\tMAX\tMAX ID")
		for _, row := range []struct {
			name string
			d    Drift
		}{{"users", d.UserDrift}, {"items", d.ItemDrift}} {
			x := row.d
			if !x.Comparable {
				p("%s\t%d\t%d\t%d\t-\t-\t(dimensions differ)", row.name, x.Common, x.OnlyA, x.OnlyB)
				continue
			}
			p("%s\t%d\t%d\t%d\t%.4g\t%.4g\t%s", row.name, x.Common, x.OnlyA, x.OnlyB, x.Mean, x.Max, x.MaxID)
		}
	})
	if t.err != nil {
		return fmt.Errorf("write diff: %w", t.err)
	}
	return nil
}

// printer prints one line of a table: tab-separated cells.
type printer func(format string, args ...any)

// text writes blocks of aligned columns, keeping the first error.
type text struct {
	w   io.Writer
	err error
}

func (t *text) block(f func(printer)) { t.table("", f) }

// section writes a titled block, indented, after a blank line.
func (t *text) section(title string, f func(printer)) {
	if t.err == nil {
		_, t.err = fmt.Fprintf(t.w, "\n%s\n", title)
	}
	t.table("  ", f)
}

func (t *text) table(indent string, f func(printer)) {
	if t.err != nil {
		return
	}
	tw := tabwriter.NewWriter(t.w, 0, 4, 2, ' ', 0)
	f(func(format string, args ...any) { fmt.Fprintf(tw, indent+format+"\n", args...) })
	t.err = tw.Flush()
}

func matrix(p printer, m [][]float64) {
	head := ""
	for c := range m {
		head += fmt.Sprintf("\tobs %d", c)
	}
	p("%s", head)
	for r, row := range m {
		line := fmt.Sprintf("clean %d", r)
		for _, v := range row {
			line += fmt.Sprintf("\t%.4f", v)
		}
		p("%s", line)
	}
}

func gmmTable(p printer, g online.GMMSummary) {
	if !g.Fitted {
		p("not fitted yet")
		return
	}
	p("COMPONENT\tWEIGHT\tMEAN SCORE\tMEAN LOG1P(C)\tVAR SCORE\tCOV\tVAR LOG1P(C)")
	for c, comp := range g.Components {
		name := fmt.Sprint(c)
		if c == g.Reliable {
			name += " (reliable)"
		}
		p("%s\t%.4f\t%.4f\t%.4f\t%.4g\t%.4g\t%.4g", name, comp.Weight, comp.Mean[0], comp.Mean[1],
			comp.Cov[0][0], comp.Cov[0][1], comp.Cov[1][1])
	}
}

func origin(m Meta) string {
	var parts []string
	if !m.CreatedAt.IsZero() {
		parts = append(parts, "created "+m.CreatedAt.UTC().Format(time.RFC3339))
	}
	if m.Source != "" {
		parts = append(parts, "from "+m.Source)
	}
	if m.Generation != 0 {
		parts = append(parts, fmt.Sprintf("checkpoint generation %d", m.Generation))
	}
	if len(parts) == 0 {
		return "unknown"
	}
	return strings.Join(parts, ", ")
}

// configPairs lists the configuration as json_name=value, in field order:
// every setting when s shows them all (Settings), else leaving out the
// zero values of fields the encoding omits when empty (as the model's own
// JSON does), so that a snapshot of an earlier format renders as it did.
func configPairs(s Settings) []string {
	v := reflect.ValueOf(s.Config)
	out := make([]string, 0, v.NumField())
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if !s.all && strings.Contains(f.Tag.Get("json"), ",omitempty") && v.Field(i).IsZero() {
			continue
		}
		value := fmt.Sprint(v.Field(i).Interface())
		if s.all && v.Field(i).Kind() == reflect.String && value == "" {
			value = `""` // dwell_direction="", not dwell_direction=
		}
		if names, ok := v.Field(i).Interface().([]string); ok && len(names) > 0 {
			// As JSON: fmt's [a b] cannot show where a name with a space
			// ("Order Cancelled", an event_order group) ends.
			b, _ := json.Marshal(names)
			value = string(b)
		}
		out = append(out, jsonName(f)+"="+value)
	}
	return out
}

func offset(n int64) string {
	if n < 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

// size formats a byte count with a binary unit.
func size(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
