package snapshot

import (
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
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	p := func(format string, args ...any) { fmt.Fprintf(tw, format+"\n", args...) }

	if r.File != "" {
		p("file\t%s", r.File)
	}
	p("format\tsnapshot v%d, model encoding v%d, %s (model %s)", r.FormatVersion, r.ModelEncoding, size(r.Bytes), size(r.ModelBytes))
	p("sha256\t%s", r.SHA256)
	p("origin\t%s", origin(r.Meta))
	s := &r.Model
	p("model\tversion %d (events learned)", r.ModelVersion)
	p("counts\tusers %d  items %d  distilled %d (%.1f%%)  refits %d  numerical errors %d",
		s.Users, s.Items, s.Distilled, 100*s.DistilledShare, s.Refits, s.NumericalErrors)
	p("shape\tK=%d  d=%d  rho=%.4g", r.K, r.Dim, s.Rho)
	p("config\t%s", strings.Join(configPairs(r.Config), "  "))
	p("")

	if len(r.Positions) == 0 {
		p("positions\tnone")
	} else {
		p("positions\tTOPIC\tPARTITION\tNEXT")
		for _, ps := range r.Positions {
			p("\t%s\t%d\t%d", ps.Topic, ps.Partition, ps.Next)
		}
	}
	p("")
	writeMatrix(tw, "mean T̂", s.MeanTransition)
	p("")
	writeGMM(tw, "GMM", s.GMM)
	p("")
	p("embedding norms\t\tCOUNT\tMIN\tP50\tMEAN\tP90\tP99\tMAX")
	for _, row := range []struct {
		name string
		n    NormStats
	}{{"users", r.Norms.Users}, {"items", r.Norms.Items}} {
		n := row.n
		p("\t%s\t%d\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f", row.name, n.Count, n.Min, n.P50, n.Mean, n.P90, n.P99, n.Max)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// WriteText writes d as the human summary of `denoiser snapshot diff`.
func (d *DiffReport) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	p := func(format string, args ...any) { fmt.Fprintf(tw, format+"\n", args...) }

	p("A\t%s", d.A)
	p("B\t%s", d.B)
	p("")
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
	p("")
	if len(d.ConfigChanges) == 0 {
		p("config\tunchanged")
	} else {
		p("config\tFIELD\tA\tB")
		for _, c := range d.ConfigChanges {
			p("\t%s\t%s\t%s", c.Field, c.A, c.B)
		}
	}
	p("")
	if len(d.Positions) == 0 {
		p("positions\tnone")
	} else {
		p("positions\tTOPIC\tPARTITION\tA\tB\tB-A")
		for _, c := range d.Positions {
			delta := "-"
			if c.A >= 0 && c.B >= 0 {
				delta = fmt.Sprintf("%+d", c.B-c.A)
			}
			p("\t%s\t%d\t%s\t%s\t%s", c.Topic, c.Partition, offset(c.A), offset(c.B), delta)
		}
	}
	p("")
	if d.MeanT == nil {
		p("mean T̂\tnot comparable (K differs)")
	} else {
		writeMatrix(tw, "mean T̂ A", d.MeanT.A)
		writeMatrix(tw, "mean T̂ B", d.MeanT.B)
		writeMatrix(tw, "B-A", d.MeanT.Delta)
		p("\tmax |B-A| = %.4g", d.MeanT.MaxAbsDelta)
	}
	p("")
	writeGMM(tw, "GMM A", d.GMM.A)
	writeGMM(tw, "GMM B", d.GMM.B)
	p("\tmax component mean shift = %.4g", d.GMM.MaxMeanShift)
	p("")
	p("embedding drift\t\tCOMMON\tONLY A\tONLY B\tMEAN\tMAX\tMAX ID")
	for _, row := range []struct {
		name string
		d    Drift
	}{{"users", d.UserDrift}, {"items", d.ItemDrift}} {
		x := row.d
		if !x.Comparable {
			p("\t%s\t%d\t%d\t%d\t-\t-\t(dimensions differ)", row.name, x.Common, x.OnlyA, x.OnlyB)
			continue
		}
		p("\t%s\t%d\t%d\t%d\t%.4g\t%.4g\t%s", row.name, x.Common, x.OnlyA, x.OnlyB, x.Mean, x.Max, x.MaxID)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write diff: %w", err)
	}
	return nil
}

func writeMatrix(w io.Writer, title string, m [][]float64) {
	fmt.Fprintf(w, "%s\t", title)
	for c := range m {
		fmt.Fprintf(w, "\tobs %d", c)
	}
	fmt.Fprintln(w)
	for r, row := range m {
		fmt.Fprintf(w, "\tclean %d", r)
		for _, v := range row {
			fmt.Fprintf(w, "\t%.4f", v)
		}
		fmt.Fprintln(w)
	}
}

func writeGMM(w io.Writer, title string, g online.GMMSummary) {
	if !g.Fitted {
		fmt.Fprintf(w, "%s\tnot fitted yet\n", title)
		return
	}
	fmt.Fprintf(w, "%s\tCOMPONENT\tWEIGHT\tMEAN SCORE\tMEAN LOG1P(C)\tVAR SCORE\tCOV\tVAR LOG1P(C)\n", title)
	for c, comp := range g.Components {
		name := fmt.Sprint(c)
		if c == g.Reliable {
			name += " (reliable)"
		}
		fmt.Fprintf(w, "\t%s\t%.4f\t%.4f\t%.4f\t%.4g\t%.4g\t%.4g\n", name, comp.Weight, comp.Mean[0], comp.Mean[1],
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

// configPairs lists the configuration as json_name=value, in field order.
func configPairs(c online.Config) []string {
	v := reflect.ValueOf(c)
	out := make([]string, 0, v.NumField())
	for i := range v.NumField() {
		out = append(out, fmt.Sprintf("%s=%v", jsonName(v.Type().Field(i)), v.Field(i).Interface()))
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
