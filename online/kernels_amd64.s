//go:build !purego

#include "textflag.h"

// SSE2 versions of the *BlocksGo functions of kernels.go: two float64
// lanes to a register. An accumulator register holds the sums of two
// adjacent lanes of the Go loop (lanes 0 and 1, or 2 and 3), and each
// element is multiplied, then added, as the Go loop does it, so that the
// results are the same bits.

// func hadamardDotBlocks(z, p, q, w []float64, acc *[4]float64)
TEXT ·hadamardDotBlocks(SB), NOSPLIT, $0-104
	MOVQ   z_base+0(FP), DI
	MOVQ   p_base+24(FP), SI
	MOVQ   p_len+32(FP), CX
	MOVQ   q_base+48(FP), DX
	MOVQ   w_base+72(FP), BX
	MOVQ   acc+96(FP), R8
	MOVUPD 0(R8), X0  // s0, s1
	MOVUPD 16(R8), X1 // s2, s3
	SHRQ   $2, CX     // blocks of four
	JZ     hdone
	XORQ   AX, AX     // byte offset

hloop:
	MOVUPD 0(SI)(AX*1), X2
	MOVUPD 16(SI)(AX*1), X3
	MOVUPD 0(DX)(AX*1), X4
	MOVUPD 16(DX)(AX*1), X5
	MULPD  X4, X2           // z = p·q
	MULPD  X5, X3
	MOVUPD X2, 0(DI)(AX*1)
	MOVUPD X3, 16(DI)(AX*1)
	MOVUPD 0(BX)(AX*1), X4
	MOVUPD 16(BX)(AX*1), X5
	MULPD  X2, X4           // w·z
	MULPD  X3, X5
	ADDPD  X4, X0           // s += w·z
	ADDPD  X5, X1
	ADDQ   $32, AX
	DECQ   CX
	JNZ    hloop

hdone:
	MOVUPD X0, 0(R8)
	MOVUPD X1, 16(R8)
	RET

// func hadamardDot3Blocks(z, p, q, w1, w2, w3 []float64, acc *[12]float64)
TEXT ·hadamardDot3Blocks(SB), NOSPLIT, $0-152
	MOVQ   z_base+0(FP), DI
	MOVQ   p_base+24(FP), SI
	MOVQ   p_len+32(FP), CX
	MOVQ   q_base+48(FP), DX
	MOVQ   w1_base+72(FP), R9
	MOVQ   w2_base+96(FP), R10
	MOVQ   w3_base+120(FP), R11
	MOVQ   acc+144(FP), R8
	MOVUPD 0(R8), X0  // a0, a1
	MOVUPD 16(R8), X1 // a2, a3
	MOVUPD 32(R8), X2 // b0, b1
	MOVUPD 48(R8), X3 // b2, b3
	MOVUPD 64(R8), X4 // c0, c1
	MOVUPD 80(R8), X5 // c2, c3
	SHRQ   $2, CX
	JZ     h3done
	XORQ   AX, AX

h3loop:
	MOVUPD 0(SI)(AX*1), X6
	MOVUPD 16(SI)(AX*1), X7
	MOVUPD 0(DX)(AX*1), X8
	MOVUPD 16(DX)(AX*1), X9
	MULPD  X8, X6            // z = p·q
	MULPD  X9, X7
	MOVUPD X6, 0(DI)(AX*1)
	MOVUPD X7, 16(DI)(AX*1)
	MOVUPD 0(R9)(AX*1), X8
	MOVUPD 16(R9)(AX*1), X9
	MULPD  X6, X8
	MULPD  X7, X9
	ADDPD  X8, X0
	ADDPD  X9, X1
	MOVUPD 0(R10)(AX*1), X10
	MOVUPD 16(R10)(AX*1), X11
	MULPD  X6, X10
	MULPD  X7, X11
	ADDPD  X10, X2
	ADDPD  X11, X3
	MOVUPD 0(R11)(AX*1), X8
	MOVUPD 16(R11)(AX*1), X9
	MULPD  X6, X8
	MULPD  X7, X9
	ADDPD  X8, X4
	ADDPD  X9, X5
	ADDQ   $32, AX
	DECQ   CX
	JNZ    h3loop

h3done:
	MOVUPD X0, 0(R8)
	MOVUPD X1, 16(R8)
	MOVUPD X2, 32(R8)
	MOVUPD X3, 48(R8)
	MOVUPD X4, 64(R8)
	MOVUPD X5, 80(R8)
	RET

// func embeddingGradsBlocks(dp, dq []float64, gain float64, w, p, q []float64, l2 float64, acc *[4]float64)
TEXT ·embeddingGradsBlocks(SB), NOSPLIT, $0-144
	MOVQ   dp_base+0(FP), DI
	MOVQ   dq_base+24(FP), SI
	MOVQ   w_base+56(FP), R9
	MOVQ   p_base+80(FP), R10
	MOVQ   p_len+88(FP), CX
	MOVQ   q_base+104(FP), R11
	MOVQ   acc+136(FP), R8
	MOVSD  gain+48(FP), X0
	SHUFPD $0, X0, X0         // gain, gain
	MOVSD  l2+128(FP), X1
	SHUFPD $0, X1, X1         // l2, l2
	XORPD  X2, X2             // +0, +0
	MOVUPD 0(R8), X3          // dp's squares: even, odd elements
	MOVUPD 16(R8), X4         // dq's
	SHRQ   $2, CX
	JZ     gdone
	SHLQ   $1, CX             // pairs in the whole blocks
	XORQ   AX, AX

gloop:
	MOVUPD 0(R9)(AX*1), X5    // w
	MOVUPD 0(R10)(AX*1), X6   // p
	MOVUPD 0(R11)(AX*1), X7   // q
	MULPD  X0, X5             // g·w
	ADDPD  X2, X5             // dz = 0 + g·w
	MOVAPD X5, X8
	MULPD  X7, X8             // dz·q
	MOVAPD X1, X9
	MULPD  X6, X9             // l2·p
	ADDPD  X9, X8             // a = dz·q + l2·p
	MULPD  X6, X5             // dz·p
	MOVAPD X1, X9
	MULPD  X7, X9             // l2·q
	ADDPD  X9, X5             // b = dz·p + l2·q
	MOVUPD X8, 0(DI)(AX*1)
	MOVUPD X5, 0(SI)(AX*1)
	MULPD  X8, X8
	ADDPD  X8, X3             // += a²
	MULPD  X5, X5
	ADDPD  X5, X4             // += b²
	ADDQ   $16, AX
	DECQ   CX
	JNZ    gloop

gdone:
	MOVUPD X3, 0(R8)
	MOVUPD X4, 16(R8)
	RET

// func containsBlocks(s []int32, v int32) bool
// Eight int32 to an iteration: two registers compared with v in each of
// their four lanes, any equal lane sets bits of the byte mask.
TEXT ·containsBlocks(SB), NOSPLIT, $0-33
	MOVQ    s_base+0(FP), SI
	MOVQ    s_len+8(FP), CX
	MOVL    v+24(FP), AX
	MOVL    AX, X0
	PSHUFD  $0, X0, X0      // v in every lane
	SHRQ    $3, CX          // blocks of eight
	JZ      cnone

cloop:
	MOVOU   0(SI), X1
	MOVOU   16(SI), X2
	PCMPEQL X0, X1
	PCMPEQL X0, X2
	POR     X2, X1
	PMOVMSKB X1, DX
	TESTL   DX, DX
	JNZ     cfound
	ADDQ    $32, SI
	DECQ    CX
	JNZ     cloop

cnone:
	MOVB    $0, ret+32(FP)
	RET

cfound:
	MOVB    $1, ret+32(FP)
	RET
