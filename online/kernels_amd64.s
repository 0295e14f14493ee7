//go:build !purego

#include "textflag.h"

// SSE2 versions of the *BlocksGo functions of kernels.go: two float64
// lanes to a register. An accumulator register holds the sums of two
// adjacent lanes of the Go loop (lanes 0 and 1, or 2 and 3), and each
// element is multiplied, then added, as the Go loop does it, so that the
// results are the same bits.

// func hadamardDotBlocksSSE2(z, p, q, w []float64, acc *[4]float64)
TEXT ·hadamardDotBlocksSSE2(SB), NOSPLIT, $0-104
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

// func hadamardDot3BlocksSSE2(z, p, q, w1, w2, w3 []float64, acc *[12]float64)
TEXT ·hadamardDot3BlocksSSE2(SB), NOSPLIT, $0-152
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

// func embeddingGradsBlocksSSE2(dp, dq []float64, gain float64, w, p, q []float64, l2 float64, acc *[4]float64)
TEXT ·embeddingGradsBlocksSSE2(SB), NOSPLIT, $0-144
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

// The AVX2 versions: four float64 lanes to a register, so an accumulator
// register holds the four lanes of the Go loop; embeddingGrads' squares,
// which the Go loop adds two lanes at a time (elements 0 and 1, then 2
// and 3, to the same two sums), are added by halves in that order. Each
// element is still multiplied, then added (no fused multiply-add), so the
// results are the same bits as the Go loop's and the SSE2 versions'.
// VZEROUPPER before each return: the Go code around them uses SSE.

// func hadamardDotBlocksAVX2(z, p, q, w []float64, acc *[4]float64)
TEXT ·hadamardDotBlocksAVX2(SB), NOSPLIT, $0-104
	MOVQ    z_base+0(FP), DI
	MOVQ    p_base+24(FP), SI
	MOVQ    p_len+32(FP), CX
	MOVQ    q_base+48(FP), DX
	MOVQ    w_base+72(FP), BX
	MOVQ    acc+96(FP), R8
	VMOVUPD 0(R8), Y0 // s0..s3
	SHRQ    $2, CX    // blocks of four
	JZ      vhdone
	XORQ    AX, AX    // byte offset

vhloop:
	VMOVUPD 0(SI)(AX*1), Y2
	VMULPD  0(DX)(AX*1), Y2, Y2 // z = p·q
	VMOVUPD Y2, 0(DI)(AX*1)
	VMULPD  0(BX)(AX*1), Y2, Y3 // w·z
	VADDPD  Y3, Y0, Y0          // s += w·z
	ADDQ    $32, AX
	DECQ    CX
	JNZ     vhloop

vhdone:
	VMOVUPD Y0, 0(R8)
	VZEROUPPER
	RET

// func hadamardDot3BlocksAVX2(z, p, q, w1, w2, w3 []float64, acc *[12]float64)
TEXT ·hadamardDot3BlocksAVX2(SB), NOSPLIT, $0-152
	MOVQ    z_base+0(FP), DI
	MOVQ    p_base+24(FP), SI
	MOVQ    p_len+32(FP), CX
	MOVQ    q_base+48(FP), DX
	MOVQ    w1_base+72(FP), R9
	MOVQ    w2_base+96(FP), R10
	MOVQ    w3_base+120(FP), R11
	MOVQ    acc+144(FP), R8
	VMOVUPD 0(R8), Y0  // a0..a3
	VMOVUPD 32(R8), Y1 // b0..b3
	VMOVUPD 64(R8), Y2 // c0..c3
	SHRQ    $2, CX
	JZ      vh3done
	XORQ    AX, AX

vh3loop:
	VMOVUPD 0(SI)(AX*1), Y3
	VMULPD  0(DX)(AX*1), Y3, Y3 // z = p·q
	VMOVUPD Y3, 0(DI)(AX*1)
	VMULPD  0(R9)(AX*1), Y3, Y4
	VADDPD  Y4, Y0, Y0
	VMULPD  0(R10)(AX*1), Y3, Y5
	VADDPD  Y5, Y1, Y1
	VMULPD  0(R11)(AX*1), Y3, Y6
	VADDPD  Y6, Y2, Y2
	ADDQ    $32, AX
	DECQ    CX
	JNZ     vh3loop

vh3done:
	VMOVUPD Y0, 0(R8)
	VMOVUPD Y1, 32(R8)
	VMOVUPD Y2, 64(R8)
	VZEROUPPER
	RET

// func embeddingGradsBlocksAVX2(dp, dq []float64, gain float64, w, p, q []float64, l2 float64, acc *[4]float64)
TEXT ·embeddingGradsBlocksAVX2(SB), NOSPLIT, $0-144
	MOVQ         dp_base+0(FP), DI
	MOVQ         dq_base+24(FP), SI
	MOVQ         w_base+56(FP), R9
	MOVQ         p_base+80(FP), R10
	MOVQ         p_len+88(FP), CX
	MOVQ         q_base+104(FP), R11
	MOVQ         acc+136(FP), R8
	VBROADCASTSD gain+48(FP), Y0 // gain in every lane
	VBROADCASTSD l2+128(FP), Y1  // l2
	VXORPD       Y2, Y2, Y2      // +0
	VMOVUPD      0(R8), X3       // dp's squares: even, odd elements
	VMOVUPD      16(R8), X4      // dq's
	SHRQ         $2, CX
	JZ           vgdone
	XORQ         AX, AX

vgloop:
	VMOVUPD      0(R10)(AX*1), Y6 // p
	VMOVUPD      0(R11)(AX*1), Y7 // q
	VMULPD       0(R9)(AX*1), Y0, Y5 // g·w
	VADDPD       Y2, Y5, Y5       // dz = 0 + g·w
	VMULPD       Y7, Y5, Y8       // dz·q
	VMULPD       Y6, Y1, Y9       // l2·p
	VADDPD       Y9, Y8, Y8       // a = dz·q + l2·p
	VMULPD       Y6, Y5, Y5       // dz·p
	VMULPD       Y7, Y1, Y9       // l2·q
	VADDPD       Y9, Y5, Y5       // b = dz·p + l2·q
	VMOVUPD      Y8, 0(DI)(AX*1)
	VMOVUPD      Y5, 0(SI)(AX*1)
	VMULPD       Y8, Y8, Y8       // a²
	VMULPD       Y5, Y5, Y5       // b²
	VADDPD       X8, X3, X3       // += a² of elements 0, 1
	VEXTRACTF128 $1, Y8, X8
	VADDPD       X8, X3, X3       // then of elements 2, 3
	VADDPD       X5, X4, X4
	VEXTRACTF128 $1, Y5, X5
	VADDPD       X5, X4, X4
	ADDQ         $32, AX
	DECQ         CX
	JNZ          vgloop

vgdone:
	VMOVUPD      X3, 0(R8)
	VMOVUPD      X4, 16(R8)
	VZEROUPPER
	RET

// func axpyAVX2(y []float64, a float64, x []float64)
// y[j] += a·x[j] for j < len(y), x at least as long: eight elements to an
// iteration, then four, then one at a time. Each element is a product,
// then a sum, rounded as a loop rounds it.
TEXT ·axpyAVX2(SB), NOSPLIT, $0-56
	MOVQ         y_base+0(FP), DI
	MOVQ         y_len+8(FP), CX
	VBROADCASTSD a+24(FP), Y0
	MOVQ         x_base+32(FP), SI
	XORQ         AX, AX          // element index
	MOVQ         CX, DX
	SHRQ         $3, DX          // blocks of eight
	JZ           afour

aloop8:
	VMULPD       0(SI)(AX*8), Y0, Y1
	VMULPD       32(SI)(AX*8), Y0, Y2
	VADDPD       0(DI)(AX*8), Y1, Y1
	VADDPD       32(DI)(AX*8), Y2, Y2
	VMOVUPD      Y1, 0(DI)(AX*8)
	VMOVUPD      Y2, 32(DI)(AX*8)
	ADDQ         $8, AX
	DECQ         DX
	JNZ          aloop8

afour:
	MOVQ         CX, DX
	SUBQ         AX, DX
	CMPQ         DX, $4
	JLT          atail
	VMULPD       0(SI)(AX*8), Y0, Y1
	VADDPD       0(DI)(AX*8), Y1, Y1
	VMOVUPD      Y1, 0(DI)(AX*8)
	ADDQ         $4, AX

atail:
	CMPQ         AX, CX
	JGE          adone
	VMULSD       0(SI)(AX*8), X0, X1
	VADDSD       0(DI)(AX*8), X1, X1
	VMOVSD       X1, 0(DI)(AX*8)
	INCQ         AX
	JMP          atail

adone:
	VZEROUPPER
	RET

// func hits16AVX2(sigs []uint64, userN []uint32, overlap *[17]float64, res []int32, u int32, limit int, nu float64) (hits, sampled int, ok bool)
// sketchCooc.hits16's loop: the sixteen 16-bit MinHash values of u and v
// compared in one instruction, their equal lanes counted by POPCNT of the
// byte mask (two bits a lane); then overlap[equal]·(n_v + nu) > 1.5 as
// the Go loop computes it (a sum, then a product: the same bits), in VEX
// forms only while the upper halves of the registers are in use. Stops
// with ok false at a user v ≥ limit, which the Go loop would not index.
TEXT ·hits16AVX2(SB), NOSPLIT, $0-121
	MOVQ     sigs_base+0(FP), SI
	MOVQ     userN_base+24(FP), R8
	MOVQ     overlap+48(FP), R9
	MOVQ     res_base+56(FP), DI
	MOVQ     res_len+64(FP), CX
	MOVLQSX  u+80(FP), R10
	MOVQ     limit+88(FP), R11
	MOVSD    nu+96(FP), X2
	MOVSD    $(1.5), X3
	MOVQ     R10, AX
	SHLQ     $5, AX
	VMOVDQU  0(SI)(AX*1), Y0 // u's signature
	VXORPD   X5, X5, X5      // 0: the conversion's upper lanes, no dependency on X1
	XORQ     BX, BX          // hits
	XORQ     DX, DX          // sampled
	XORQ     R12, R12        // index into res

hloop:
	CMPQ     R12, CX
	JGE      hend
	MOVLQSX  0(DI)(R12*4), AX // v
	TESTQ    AX, AX
	JLT      hend             // an empty slot: the sample ends
	INCQ     DX
	INCQ     R12
	CMPQ     AX, R10
	JEQ      hloop            // u itself
	CMPQ     AX, R11
	JAE      hbad
	MOVQ     AX, R13
	SHLQ     $5, R13
	VPCMPEQW 0(SI)(R13*1), Y0, Y4
	MOVL     0(R8)(AX*4), AX  // n_v
	VCVTSI2SDQ AX, X5, X1
	VADDSD   X2, X1, X1       // nu + n_v
	VPMOVMSKB Y4, R13
	POPCNTL  R13, R13
	SHRL     $1, R13          // equal lanes
	VMULSD   0(R9)(R13*8), X1, X1 // overlap[equal]·(nu + n_v)
	VUCOMISD X3, X1
	JBE      hloop
	INCQ     BX
	JMP      hloop

hend:
	MOVQ     BX, hits+104(FP)
	MOVQ     DX, sampled+112(FP)
	MOVB     $1, ok+120(FP)
	VZEROUPPER
	RET

hbad:
	MOVQ     $0, hits+104(FP)
	MOVQ     $0, sampled+112(FP)
	MOVB     $0, ok+120(FP)
	VZEROUPPER
	RET
