package eval

import (
	"fmt"
	"os"
	"path/filepath"

	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/vgimg"
)

func vgimgNew(w, h vg.Length) *vgimg.Canvas {
	return vgimg.New(w, h)
}

// savePNGCanvas writes the canvas as a PNG through a temporary file.
func savePNGCanvas(c *vgimg.Canvas, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("save figure: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("save figure %s: %w", path, err)
	}
	if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(f); err != nil {
		f.Close()
		os.Remove(f.Name())
		return fmt.Errorf("save figure %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("save figure %s: %w", path, err)
	}
	return os.Rename(f.Name(), path)
}
