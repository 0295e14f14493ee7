package online

import (
	"math"
	"math/big"
)

// exp is e^x, the model's exponential in place of math.Exp, whose amd64
// assembly takes a fused multiply-add path where the CPU has FMA and a
// separate multiply and add where it has not: the two differ in the last
// bit for some x, and one such bit, learned from, moves every later score
// (a replay under GODEBUG=cpu.fma=off, as on a CPU or an emulator without
// FMA, parted from the default at its 12,851st line at stop 70). exp rounds
// every product apart from its sum (each product is converted to float64,
// which the Go specification says prevents fusing), so it gives the same
// bits on every CPU, as the rest of the model does where built with
// GOAMD64=v1 (kernels.go).
//
// It is table-driven (P. T. P. Tang, "Table-driven implementation of the
// exponential function in IEEE floating-point arithmetic", ACM TOMS 15(2),
// 1989): x = (128·m + j)·ln2/128 + r with |r| ≤ ln2/256, so that
// e^x = 2^m · 2^(j/128) · e^r, 2^(j/128) read from a table held as the sum
// of two doubles and e^r − 1 a polynomial of degree 5 (its truncation
// error below 10⁻¹⁸). Its error is within one unit in the last place
// (TestExpAccuracy measures it against 200-bit arithmetic); and it is about
// twice as fast as math.Exp here (BenchmarkExp), whose polynomial is one
// long chain of dependent steps.
//
// exp(NaN) is NaN, exp(+Inf) +Inf, exp(−Inf) 0; it overflows to +Inf above
// ln(MaxFloat64) and underflows to 0 below −745.14, with subnormal results
// between (rounded twice there).
func exp(x float64) float64 {
	switch {
	case x != x:
		return x
	case x > expOverflow:
		return math.Inf(1)
	case x < expUnderflowAt:
		return 0
	}
	t := float64(x * expInvStep)
	kf := (t + expShifter) - expShifter // t rounded to the nearest integer
	k := int64(kf)
	// x − k·step in two parts: k·expStepHi is exact (expStepHi has 20 zero
	// bits at the end and |k| < 2^18), and so is x less it.
	r := (x - float64(kf*expStepHi)) - float64(kf*expStepLo)
	r2 := float64(r * r)
	p := r + float64(r2*(0.5+float64(r*(1.0/6)))) + float64(float64(r2*r2)*(1.0/24+float64(r*(1.0/120))))
	two := &expTable[k&(expTableLen-1)]
	y := two.hi + (two.lo + float64(two.hi*p))
	m := k >> expTableBits
	switch {
	case m > 1023: // only close to expOverflow
		return float64(y*2) * math.Float64frombits(uint64(m-1+1023)<<52)
	case m < -1022: // subnormal or 0
		return float64(y*math.Float64frombits(uint64(m+1000+1023)<<52)) * 0x1p-1000
	}
	return y * math.Float64frombits(uint64(m+1023)<<52)
}

const (
	expTableBits = 7
	expTableLen  = 1 << expTableBits
	// expStepHi is ln2/128 with its last 20 bits of mantissa cleared;
	// expStepLo the rest of it.
	expStepHi  = 0x1.62e42fef00000p-8
	expStepLo  = math.Ln2/expTableLen - expStepHi
	expInvStep = expTableLen / math.Ln2
	expShifter = 0x1.8p52 // adding and taking it away rounds to an integer
	// expOverflow is ln(MaxFloat64): e^x overflows above it.
	expOverflow = 7.09782712893383973096e+02
	// expUnderflowAt is ln of half the least subnormal: e^x rounds to 0
	// below it.
	expUnderflowAt = -7.45133219101941108420e+02
)

// expTable holds 2^(j/128) for j = 0..127, each as hi + lo: hi rounded
// to the nearest double, lo the remainder rounded.
var expTable = func() (t [expTableLen]struct{ hi, lo float64 }) {
	const prec = 256
	// 2^(1/2^i) for i = 1..7, by square roots of 2.
	var roots [expTableBits]*big.Float
	r := new(big.Float).SetPrec(prec).SetInt64(2)
	for i := range roots {
		r = new(big.Float).SetPrec(prec).Sqrt(r)
		roots[i] = r
	}
	for j := range t {
		v := new(big.Float).SetPrec(prec).SetInt64(1)
		for i := range roots { // bit i of j, from the highest, is 1/2^(i+1)
			if j&(expTableLen>>(i+1)) != 0 {
				v.Mul(v, roots[i])
			}
		}
		hi, _ := v.Float64()
		lo, _ := new(big.Float).SetPrec(prec).Sub(v, new(big.Float).SetFloat64(hi)).Float64()
		t[j].hi, t[j].lo = hi, lo
	}
	return t
}()

// powPositive is x^y for x > 0, as exp(y·ln x), in place of math.Pow,
// which takes math.Exp's path for a y with a fractional part. Its relative
// error is about |y·ln x| units in the last place.
func powPositive(x, y float64) float64 {
	return exp(float64(y * math.Log(x)))
}
