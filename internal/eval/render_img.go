package eval

import (
	"io"

	"denoiser/internal/atomicfile"
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
	err := atomicfile.WriteFile(path, func(f io.Writer) error {
		_, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(f)
		return err
	})
	if err != nil {
		return fmt.Errorf("save figure %s: %w", path, err)
	}
	return nil
}
