package eval

import (
	"bytes"
	"denoiser/internal/atomicfile"
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Meta says what produced a report: it heads every Markdown report and is
// embedded in the JSON.
type Meta struct {
	Command string  `json:"command"`
	Commit  string  `json:"commit"`
	Data    string  `json:"data"`
	Seconds float64 `json:"seconds"`
}

// Commit returns the VCS revision the running binary was built from
// ("-dirty" appended for a modified tree), or "unknown".
func Commit() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	rev, dirty := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		// Built without VCS stamping (-buildvcs=false): ask git.
		out, err := exec.Command("git", "rev-parse", "HEAD").Output()
		if err != nil {
			return "unknown"
		}
		rev = strings.TrimSpace(string(out))
		// The reports' own outputs do not make the source dirty: make eval
		// writes one report before it runs the next.
		st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)docs/results").Output()
		dirty = err == nil && len(bytes.TrimSpace(st)) > 0
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}

func (m Meta) header(w io.Writer, title string) {
	fmt.Fprintf(w, "# %s\n\n", title)
	fmt.Fprintf(w, "Produced by `%s` at commit `%s` in %.0f s.\n", m.Command, m.Commit, m.Seconds)
	if m.Data != "" {
		fmt.Fprintf(w, "Data: `%s` (MovieLens 100K, F. M. Harper and J. A. Konstan, \"The MovieLens Datasets: History and Context\", ACM TiiS 5(4), 2015; research use, not redistributed here).\n", m.Data)
	}
	fmt.Fprintln(w)
}

// WriteJSON writes v as indented JSON to path through a temporary file
// and a rename.
func WriteJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	return writeAtomic(path, append(b, '\n'))
}

func writeAtomic(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return atomicfile.WriteFile(path, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

// series is one line of a line chart.
type series struct {
	name   string
	xs, ys []float64
	err    []float64 // optional ± error bars
	dashed bool
}

var palette = []color.Color{
	color.RGBA{31, 119, 180, 255}, color.RGBA{255, 127, 14, 255}, color.RGBA{44, 160, 44, 255},
	color.RGBA{214, 39, 40, 255}, color.RGBA{148, 103, 189, 255}, color.RGBA{140, 86, 75, 255},
	color.RGBA{227, 119, 194, 255}, color.RGBA{127, 127, 127, 255}, color.RGBA{188, 189, 34, 255},
	color.RGBA{23, 190, 207, 255},
}

// linePlot draws the series into a new plot.
func linePlot(title, xl, yl string, ss []series) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xl
	p.Y.Label.Text = yl
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	for n, s := range ss {
		pts := make(plotter.XYs, 0, len(s.xs))
		for k := range s.xs {
			if !math.IsNaN(s.ys[k]) {
				pts = append(pts, plotter.XY{X: s.xs[k], Y: s.ys[k]})
			}
		}
		if len(pts) == 0 {
			continue
		}
		l, pt, err := plotter.NewLinePoints(pts)
		if err != nil {
			return nil, fmt.Errorf("plot %s: %w", s.name, err)
		}
		c := palette[n%len(palette)]
		l.Color, pt.Color = c, c
		l.Width = vg.Points(1.5)
		pt.Shape = draw.CircleGlyph{}
		if s.dashed {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		p.Add(l, pt)
		p.Legend.Add(s.name, l, pt)
		if s.err != nil {
			ye := make(plotter.YErrors, len(pts))
			for k := range ye {
				ye[k] = struct{ Low, High float64 }{s.err[k], s.err[k]}
			}
			eb, err := plotter.NewYErrorBars(struct {
				plotter.XYer
				plotter.YErrorer
			}{pts, ye})
			if err == nil {
				eb.Color = c
				p.Add(eb)
			}
		}
	}
	return p, nil
}

// savePNG writes p as a PNG of the given size in inches.
func savePNG(p *plot.Plot, path string, w, h float64) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("save figure: %w", err)
	}
	wt, err := p.WriterTo(vg.Length(w)*vg.Inch, vg.Length(h)*vg.Inch, "png")
	if err != nil {
		return fmt.Errorf("save figure %s: %w", path, err)
	}
	if err := atomicfile.WriteFile(path, func(f io.Writer) error { _, err := wt.WriteTo(f); return err }); err != nil {
		return fmt.Errorf("save figure %s: %w", path, err)
	}
	return nil
}

// pm formats mean ± std.
func pm(mean, std float64) string {
	return fmt.Sprintf("%.4f ± %.4f", mean, std)
}

func mark(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

var nan = math.NaN()

// gridFigure draws one line chart per title side by side into one PNG.
func gridFigure(path string, titles []string, xl, yl string, plots [][]series) error {
	return gridFigureRows(path, titles, xl, yl, plots, len(plots))
}

// gridFigureRows draws one line chart per title, cols to a row.
func gridFigureRows(path string, titles []string, xl, yl string, plots [][]series, cols int) error {
	rows := (len(plots) + cols - 1) / cols
	ps := make([][]*plot.Plot, rows)
	for n, ss := range plots {
		p, err := linePlot(titles[n], xl, yl, ss)
		if err != nil {
			return err
		}
		ps[n/cols] = append(ps[n/cols], p)
	}
	for r := range ps {
		for len(ps[r]) < cols {
			ps[r] = append(ps[r], nil)
		}
	}
	img := vgimgNew(vg.Length(5*cols)*vg.Inch, vg.Length(4*rows)*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align(ps, tiles, dc)
	for r := range ps {
		for c, p := range ps[r] {
			if p != nil {
				p.Draw(canvases[r][c])
			}
		}
	}
	return savePNGCanvas(img, path)
}
