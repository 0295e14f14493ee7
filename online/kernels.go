package online

// The vector kernels' inner loops: the whole blocks of four elements of
// hadamardDot, hadamardDot3 and embeddingGrads, which take most of a
// step's time. Each exists twice:
//
//   - in Go, below (the *Go functions): the reference, and what other
//     architectures and the purego build tag run;
//   - in assembly on amd64 (kernels_amd64.s): AVX2, four elements to an
//     instruction, where the processor has it, else SSE2, two (Go does
//     not vectorise loops).
//
// The two give the same bits. Each block's elements are worked in the
// same lanes of the same accumulators, in the same order, with the same
// operations (a product, then a sum; no fused multiply-add), so every
// partial sum is rounded as the Go loop rounds it
// (TestKernelsMatchGo). The scores, the golden files and a replay do
// not depend on which one ran. That holds where Go compiles x*y + z as a
// product and a sum: on amd64 at its default level, GOAMD64=v1, which the
// Makefile pins. Go may fuse them into one instruction (the language
// allows it) with GOAMD64=v3 and on arm64, in these loops and in the rest
// of the model alike, and the bits then differ from the golden files'.
//
// Each takes the slices resliced to one length n by its caller, works on
// the first n &^ 3 elements, and leaves its accumulators in acc: the
// caller adds the tail and combines them as before.

// hadamardDotBlocksGo writes p⊙q into z and accumulates w·z lane by lane
// of four: acc[l] holds the sum over elements j ≡ l (mod 4).
func hadamardDotBlocksGo(z, p, q, w []float64, acc *[4]float64) {
	n := len(p) &^ 3
	q, z, w = q[:n], z[:n], w[:n]
	s0, s1, s2, s3 := acc[0], acc[1], acc[2], acc[3]
	for i := 0; i < n; i += 4 {
		p4, q4, z4, w4 := p[i:i+4:i+4], q[i:i+4:i+4], z[i:i+4:i+4], w[i:i+4:i+4]
		z0, z1, z2, z3 := p4[0]*q4[0], p4[1]*q4[1], p4[2]*q4[2], p4[3]*q4[3]
		z4[0], z4[1], z4[2], z4[3] = z0, z1, z2, z3
		s0 += w4[0] * z0
		s1 += w4[1] * z1
		s2 += w4[2] * z2
		s3 += w4[3] * z3
	}
	acc[0], acc[1], acc[2], acc[3] = s0, s1, s2, s3
}

// hadamardDot3BlocksGo is hadamardDotBlocksGo for three vectors: acc[0:4]
// for w1, acc[4:8] for w2, acc[8:12] for w3.
func hadamardDot3BlocksGo(z, p, q, w1, w2, w3 []float64, acc *[12]float64) {
	n := len(p) &^ 3
	q, z, w1, w2, w3 = q[:n], z[:n], w1[:n], w2[:n], w3[:n]
	a0, a1, a2, a3 := acc[0], acc[1], acc[2], acc[3]
	b0, b1, b2, b3 := acc[4], acc[5], acc[6], acc[7]
	c0, c1, c2, c3 := acc[8], acc[9], acc[10], acc[11]
	for i := 0; i < n; i += 4 {
		p4, q4, z4 := p[i:i+4:i+4], q[i:i+4:i+4], z[i:i+4:i+4]
		z0, z1, z2, z3 := p4[0]*q4[0], p4[1]*q4[1], p4[2]*q4[2], p4[3]*q4[3]
		z4[0], z4[1], z4[2], z4[3] = z0, z1, z2, z3
		u4, v4, w4 := w1[i:i+4:i+4], w2[i:i+4:i+4], w3[i:i+4:i+4]
		a0 += u4[0] * z0
		a1 += u4[1] * z1
		a2 += u4[2] * z2
		a3 += u4[3] * z3
		b0 += v4[0] * z0
		b1 += v4[1] * z1
		b2 += v4[2] * z2
		b3 += v4[3] * z3
		c0 += w4[0] * z0
		c1 += w4[1] * z1
		c2 += w4[2] * z2
		c3 += w4[3] * z3
	}
	acc[0], acc[1], acc[2], acc[3] = a0, a1, a2, a3
	acc[4], acc[5], acc[6], acc[7] = b0, b1, b2, b3
	acc[8], acc[9], acc[10], acc[11] = c0, c1, c2, c3
}

// embeddingGradsBlocksGo writes dp = dz⊙q + l2·p and dq = dz⊙p + l2·q
// for dz = 0 + g·w (embeddingGrads) and accumulates their squares in
// alternate lanes: acc[0], acc[1] for dp's even and odd elements, acc[2],
// acc[3] for dq's.
func embeddingGradsBlocksGo(dp, dq []float64, g float64, w, p, q []float64, l2 float64, acc *[4]float64) {
	n := len(p) &^ 3
	dp, dq, w, p, q = dp[:n], dq[:n], w[:n], p[:n], q[:n]
	p0, p1, q0, q1 := acc[0], acc[1], acc[2], acc[3]
	for j := 0; j < n; j += 4 {
		w4, p4, q4 := w[j:j+4:j+4], p[j:j+4:j+4], q[j:j+4:j+4]
		dp4, dq4 := dp[j:j+4:j+4], dq[j:j+4:j+4]
		dz0 := 0 + g*w4[0]
		a0 := dz0*q4[0] + l2*p4[0]
		b0 := dz0*p4[0] + l2*q4[0]
		dz1 := 0 + g*w4[1]
		a1 := dz1*q4[1] + l2*p4[1]
		b1 := dz1*p4[1] + l2*q4[1]
		dz2 := 0 + g*w4[2]
		a2 := dz2*q4[2] + l2*p4[2]
		b2 := dz2*p4[2] + l2*q4[2]
		dz3 := 0 + g*w4[3]
		a3 := dz3*q4[3] + l2*p4[3]
		b3 := dz3*p4[3] + l2*q4[3]
		dp4[0], dq4[0], dp4[1], dq4[1] = a0, b0, a1, b1
		dp4[2], dq4[2], dp4[3], dq4[3] = a2, b2, a3, b3
		p0 += a0 * a0
		q0 += b0 * b0
		p1 += a1 * a1
		q1 += b1 * b1
		p0 += a2 * a2
		q0 += b2 * b2
		p1 += a3 * a3
		q1 += b3 * b3
	}
	acc[0], acc[1], acc[2], acc[3] = p0, p1, q0, q1
}

// containsBlocksGo reports whether the whole blocks of eight of s hold v
// (len(s) is a multiple of 8 where containsItem calls it).
func containsBlocksGo(s []int32, v int32) bool {
	for k := 0; k+8 <= len(s); k += 8 {
		s8 := s[k : k+8 : k+8]
		if s8[0] == v || s8[1] == v || s8[2] == v || s8[3] == v ||
			s8[4] == v || s8[5] == v || s8[6] == v || s8[7] == v {
			return true
		}
	}
	return false
}
