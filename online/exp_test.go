package online

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"testing"

	"golang.org/x/sys/cpu"
)

// expBig is e^x to about 200 bits: e^(x/2^20) by its Taylor series, then
// squared 20 times.
func expBig(x float64) *big.Float {
	const prec = 300
	y := new(big.Float).SetPrec(prec).SetFloat64(x)
	y.SetMantExp(y, -20)
	sum := new(big.Float).SetPrec(prec).SetInt64(1)
	term := new(big.Float).SetPrec(prec).SetInt64(1)
	for n := int64(1); n <= 30; n++ {
		term.Mul(term, y)
		term.Quo(term, new(big.Float).SetPrec(prec).SetInt64(n))
		sum.Add(sum, term)
	}
	for range 20 {
		sum.Mul(sum, sum)
	}
	return sum
}

// ulpError is |got − want| in units of the last place of want rounded to
// a double.
func ulpError(got float64, want *big.Float) float64 {
	w, _ := want.Float64()
	ulp := math.Nextafter(w, math.Inf(1)) - w
	d := new(big.Float).SetPrec(want.Prec()).SetFloat64(got)
	d.Sub(d, want)
	e, _ := d.Float64()
	return math.Abs(e) / ulp
}

// TestExpAccuracy measures exp against 200-bit arithmetic on points drawn
// over the range the model uses most and over the whole range of normal
// results: within one unit in the last place everywhere, and correctly
// rounded (within half a unit) on all but a few.
func TestExpAccuracy(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	n := 20_000
	if testing.Short() {
		n = 2_000
	}
	var worst, worstX float64
	misrounded := 0
	for i := range n {
		x := (2*r.Float64() - 1) * 40
		if i%4 == 0 {
			x = -708 + 1417*r.Float64()
		}
		e := ulpError(exp(x), expBig(x))
		if e > worst {
			worst, worstX = e, x
		}
		if e > 0.5 {
			misrounded++
		}
	}
	t.Logf("worst %.3f ulp at x = %v; %d of %d not correctly rounded", worst, worstX, misrounded, n)
	if worst > 1 {
		t.Errorf("exp(%v) is %.3f ulp from e^x, want at most 1", worstX, worst)
	}
	if misrounded > n/100 {
		t.Errorf("%d of %d results are not correctly rounded, want at most 1 %%", misrounded, n)
	}
}

// TestExpSpecial checks the special values, the ends of the range and the
// points where the answer is exact.
func TestExpSpecial(t *testing.T) {
	for _, c := range []struct{ x, want float64 }{
		{0, 1},
		{math.Copysign(0, -1), 1},
		{math.Inf(1), math.Inf(1)},
		{math.Inf(-1), 0},
		{710, math.Inf(1)},
		{1e300, math.Inf(1)},
		{-746, 0},
		{-760, 0},
		{-1082, 0},
		{-1e300, 0},
		{-math.MaxFloat64, 0},
		{math.Ln2 * 10, 1024},
	} {
		if got := exp(c.x); got != c.want {
			t.Errorf("exp(%v) = %v, want %v", c.x, got, c.want)
		}
	}
	if got := exp(math.NaN()); !math.IsNaN(got) {
		t.Errorf("exp(NaN) = %v, want NaN", got)
	}
	// The largest results (m > 1023 in exp) within one unit in the last
	// place of e^x, and subnormal ones (rounded twice) within one unit of
	// the least subnormal.
	for _, x := range []float64{709, 709.4, 709.5, 709.78, 709.7827128933839, expOverflow} {
		if got := exp(x); math.IsInf(got, 0) || ulpError(got, expBig(x)) > 1 {
			t.Errorf("exp(%v) = %v, e^x = %v", x, got, expBig(x))
		}
	}
	for _, x := range []float64{-708.5, -720, -740, -745.13} {
		want, _ := expBig(x).Float64()
		if got := exp(x); got == 0 || math.Abs(got-want) > math.SmallestNonzeroFloat64 {
			t.Errorf("exp(%v) = %v, e^x = %v", x, got, want)
		}
	}
}

// TestExpTable checks that each entry's two parts sum to 2^(j/128): the
// entry to the power 128/gcd reaches a power of two.
func TestExpTable(t *testing.T) {
	for j, e := range expTable {
		v := new(big.Float).SetPrec(300).SetFloat64(e.hi)
		v.Add(v, new(big.Float).SetFloat64(e.lo))
		p := new(big.Float).SetPrec(300).SetInt64(1)
		for range expTableLen {
			p.Mul(p, v)
		}
		want := new(big.Float).SetPrec(300).SetMantExp(big.NewFloat(1), j) // (2^(j/128))^128 = 2^j
		d := new(big.Float).Sub(p, want)
		d.Quo(d, want)
		rel, _ := d.Float64()
		if math.Abs(rel) > 1e-28 {
			t.Errorf("expTable[%d] = %v + %v: to the 128th it is 2^%d × (1 %+g)", j, e.hi, e.lo, j, rel)
		}
	}
}

// TestSameBitsWithoutFMA steps a model in this process's test binary run
// twice more, once as it is and once with GODEBUG=cpu.fma=off (as on a
// CPU or an emulator without FMA, where math.Exp takes another path), and
// requires the same model bytes from both: the model's bits do not depend
// on the CPU it runs on. With math.Exp in place of exp the two part.
func TestSameBitsWithoutFMA(t *testing.T) {
	const childEnv = "DENOISER_TEST_MODEL_BITS"
	if os.Getenv(childEnv) == "1" {
		m, err := New(DefaultConfig(), NewSource(1))
		if err != nil {
			t.Fatal(err)
		}
		runScores(t, m, testStream(4000, 5))
		fmt.Printf("model %x\n", sha256.Sum256(encode(t, m)))
		return
	}
	if runtime.GOARCH != "amd64" || !cpu.X86.HasFMA {
		t.Skip("math.Exp has one path on this machine: nothing to compare")
	}
	hash := func(godebug string) string {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSameBitsWithoutFMA$", "-test.count=1")
		cmd.Env = append(os.Environ(), childEnv+"=1", "GODEBUG="+godebug)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("GODEBUG=%s: %v\n%s", godebug, err, out)
		}
		i := bytes.Index(out, []byte("model "))
		if i < 0 {
			t.Fatalf("GODEBUG=%s: no model hash in\n%s", godebug, out)
		}
		return string(out[i : i+len("model ")+64])
	}
	with, without := hash(""), hash("cpu.fma=off")
	if with != without {
		t.Errorf("the model's bytes depend on FMA: %s with it, %s without", with, without)
	}
}

var expSink float64

// BenchmarkExp compares exp with math.Exp on a chain of dependent calls
// (the latency the model's steps wait for) and on independent ones.
func BenchmarkExp(b *testing.B) {
	xs := make([]float64, 1024)
	r := rand.New(rand.NewPCG(3, 4))
	for i := range xs {
		xs[i] = (2*r.Float64() - 1) * 10
	}
	for _, f := range []struct {
		name string
		fn   func(float64) float64
	}{{"exp", exp}, {"math.Exp", math.Exp}} {
		b.Run(f.name+"/chain", func(b *testing.B) {
			s := 0.0
			for i := 0; b.Loop(); i++ {
				s = f.fn(xs[i&1023] + s*1e-300)
			}
			expSink = s
		})
		b.Run(f.name+"/independent", func(b *testing.B) {
			s := 0.0
			for i := 0; b.Loop(); i++ {
				s += f.fn(xs[i&1023])
			}
			expSink = s
		})
	}
}
