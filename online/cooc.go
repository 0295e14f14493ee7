package online

import (
	"math/rand/v2"
	"slices"
)

// Co-occurrence c_ui = |{u' ∈ U_i, u' ≠ u : |I_u ∩ I_u'| > 1}| over the
// interactions seen before the current event.
//
// The exact estimator keeps every user set and item set; its memory grows
// with the data. The sketch keeps, per item, a reservoir of at most S users
// (Vitter's algorithm R, driven by the model's random source) and the
// number of interactions n_i; per user, a MinHash signature of H values and
// the number of interactions n_u. For each sampled u' it estimates the
// Jaccard index J of I_u and I_u' as the share of equal MinHash values and
// the intersection as J/(1+J)·(n_u + n_u'); c_ui is the count of sampled
// users whose estimated intersection exceeds 1, scaled by n_i/|sample|.
// Memory is O(S) per item and O(H) per user, whatever the stream length.
//
// MinHash values are kept to 16 bits (b-bit MinHash, Li & König 2010), four
// to a uint64, so that a few word operations compare four of them; two
// different minima collide in 16 bits with probability 2^-16, a bias far
// below the sketch's sampling error.
type cooccurrence interface {
	// count estimates c_ui before (u,i) is added.
	count(u, i int32) float64
	// add records the interaction (u,i).
	add(u, i int32, r *rand.Rand)
	// grow makes room for users < nu and items < ni.
	grow(nu, ni int)
	// reserve gives the per-row arrays capacity for nu users and ni
	// items more (Model.reserve).
	reserve(nu, ni int)
	// dropUser empties user row u for a new user, and dropItem item row
	// i for a new item (bounds.go). A row of the other side whose state
	// changes with it is stamped epoch in stamps, that side's stamps.
	dropUser(u int32, itemStamps []uint64, epoch uint64)
	dropItem(i int32, userStamps []uint64, epoch uint64)
	// copyInto copies the estimator into dst and returns the copy. If dst
	// is of the same kind and holds the first nu users and ni items as
	// they were, only the listed users and items and the new ones are
	// copied; nu = ni = 0 copies all.
	copyInto(dst cooccurrence, users, items []rowSpan, nu, ni int) cooccurrence
	// encodeRows writes the state of the listed user and item rows (a
	// delta, delta.go); decodeRows reads it into those rows of an
	// estimator grown to nu users and ni items, checking the indices.
	encodeRows(e *encoder, users, items []rowSpan)
	decodeRows(d *decoder, users, items []rowSpan, nu, ni int)
	// kind is the byte the encoding names the estimator by.
	kind() uint8
	// encode writes the estimator's state; decode reads it, for nu users
	// and ni items, and checks the indices it holds.
	encode(e *encoder)
	decode(d *decoder, nu, ni int)
}

// mix64 is the splitmix64 finalizer: a fixed, seedless hash.
func mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

type sketchCooc struct {
	s, h      int
	itemN     []uint32 // interactions per item
	itemRes   []int32  // S slots per item, -1 empty
	userN     []uint32 // interactions per user
	userSig   []uint64 // H/4 words per user, four 16-bit MinHash values each
	hashSeeds []uint64
	// itemSig holds H/4 words per item for the items hashed so far: the
	// item's 16-bit hash values, which are the same for every user that
	// adds it. Derived from the index on first use; not encoded.
	itemSig []uint64
	// overlap[eq] is J/(1+J) for J = eq/H, the share of n_u + n_u' that
	// is the estimated intersection when eq of the H MinHash values agree:
	// count looks it up rather than dividing twice per sampled user.
	overlap []float64
}

const (
	laneLow  = 0x7fff7fff7fff7fff
	laneHigh = 0x8000800080008000
)

// differingLanes is 1 in each 16-bit lane in which a and b differ, 0 in
// the others. Added up over words, each lane counts up to 65535.
func differingLanes(a, b uint64) uint64 {
	x := a ^ b
	nonzero := ((x & laneLow) + laneLow) | x
	return (nonzero & laneHigh) >> 15
}

// laneSum is the sum of the four 16-bit lanes of x, if it is below 65536:
// the top lane of the product is the sum of all four.
func laneSum(x uint64) int { return int((x * 0x0001000100010001) >> 48) }

// equalLanes counts the 16-bit lanes in which a and b agree.
func equalLanes(a, b uint64) int { return 4 - laneSum(differingLanes(a, b)) }

func newSketchCooc(s, h int) *sketchCooc {
	c := &sketchCooc{s: s, h: h, hashSeeds: make([]uint64, h), overlap: overlapShares(h)}
	for k := range c.hashSeeds {
		c.hashSeeds[k] = mix64(uint64(k)*0x632be59bd9b4e019 + 1)
	}
	return c
}

// overlapShares returns J/(1+J) for J = eq/h, eq = 0..h.
func overlapShares(h int) []float64 {
	shares := make([]float64, h+1)
	for eq := range shares {
		j := float64(eq) / float64(h)
		shares[eq] = j / (1 + j)
	}
	return shares
}

func (c *sketchCooc) reserve(nu, ni int) {
	c.userN = reserveRows(c.userN, nu)
	c.userSig = reserveRows(c.userSig, nu*c.h/4)
	c.itemN = reserveRows(c.itemN, ni)
	c.itemRes = reserveRows(c.itemRes, ni*c.s)
	c.itemSig = reserveRows(c.itemSig, ni*c.h/4)
}

func (c *sketchCooc) grow(nu, ni int) {
	for len(c.userN) < nu {
		c.userN = append(c.userN, 0)
		for k := 0; k < c.h/4; k++ {
			c.userSig = append(c.userSig, ^uint64(0))
		}
	}
	for len(c.itemN) < ni {
		c.itemN = append(c.itemN, 0)
		for k := 0; k < c.s; k++ {
			c.itemRes = append(c.itemRes, -1)
		}
	}
}

// dropUser and dropItem reset the row's counts, signature or reservoir.
// Reservoirs that hold user u go on holding it: they now sample the new
// user, until they are overwritten (bounds.go).
func (c *sketchCooc) dropUser(u int32, _ []uint64, _ uint64) {
	c.userN[u] = 0
	w := c.h / 4
	sig := c.userSig[int(u)*w : int(u+1)*w]
	for k := range sig {
		sig[k] = ^uint64(0)
	}
}

func (c *sketchCooc) dropItem(i int32, _ []uint64, _ uint64) {
	c.itemN[i] = 0
	res := c.itemRes[int(i)*c.s : int(i+1)*c.s]
	for k := range res {
		res[k] = -1
	}
}

func (c *sketchCooc) count(u, i int32) float64 {
	n := c.itemN[i]
	if n == 0 || c.userN[u] == 0 {
		return 0
	}
	res := c.itemRes[int(i)*c.s : int(i+1)*c.s]
	nu := float64(c.userN[u])
	var hits, sampled int
	if c.h == 16 {
		hits, sampled = c.hits16(res, u, nu)
	} else {
		hits, sampled = c.hits(res, u, nu)
	}
	if sampled == 0 {
		return 0
	}
	return float64(hits) * float64(n) / float64(sampled)
}

// hits counts the users in the sample res, other than u, whose estimated
// intersection with u exceeds 1, and returns it with the sample's size.
// nu is n_u.
func (c *sketchCooc) hits(res []int32, u int32, nu float64) (hits, sampled int) {
	w := c.h / 4
	su := c.userSig[int(u)*w : int(u+1)*w]
	for _, v := range res {
		if v < 0 {
			break
		}
		sampled++
		if v == u {
			continue
		}
		sv := c.userSig[int(v)*w : int(v+1)*w]
		sv = sv[:len(su)]
		// The differing lanes of all H/4 words, added lane by lane (at
		// most H/4 ≤ 256 each), then summed once.
		var differ uint64
		for k, x := range su {
			differ += differingLanes(x, sv[k])
		}
		if c.overlap[c.h-laneSum(differ)]*(nu+float64(c.userN[v])) > 1.5 {
			hits++
		}
	}
	return hits, sampled
}

// hits16 is hits for the default 16 hashes, a signature of four words:
// the same counts, sixteen lanes compared at once in AVX2 where the
// processor has it (hits16Kernel), else by the Go loop, unrolled.
func (c *sketchCooc) hits16(res []int32, u int32, nu float64) (hits, sampled int) {
	sigs, userN, overlap := c.userSig, c.userN, (*[17]float64)(c.overlap)
	if hits, sampled, ok := hits16Kernel(sigs, userN, overlap, res, u, nu); ok {
		return hits, sampled
	}
	return hits16Go(sigs, userN, overlap, res, u, nu)
}

// hits16Go is hits16's loop in Go: what runs without AVX2, and the
// reference its assembly is tested against.
func hits16Go(sigs []uint64, userN []uint32, overlap *[17]float64, res []int32, u int32, nu float64) (hits, sampled int) {
	su := (*[4]uint64)(sigs[int(u)*4:])
	for _, v := range res {
		if v < 0 {
			break
		}
		sampled++
		if v == u {
			continue
		}
		sv := (*[4]uint64)(sigs[int(v)*4:])
		differ := differingLanes(su[0], sv[0]) + differingLanes(su[1], sv[1]) +
			differingLanes(su[2], sv[2]) + differingLanes(su[3], sv[3])
		if overlap[16-laneSum(differ)]*(nu+float64(userN[v])) > 1.5 {
			hits++
		}
	}
	return hits, sampled
}

func (c *sketchCooc) add(u, i int32, r *rand.Rand) {
	n := c.itemN[i]
	res := c.itemRes[int(i)*c.s : int(i+1)*c.s]
	if int(n) < c.s {
		res[n] = u
	} else if j := r.IntN(int(n) + 1); j < c.s {
		res[j] = u
	}
	c.itemN[i] = n + 1
	c.userN[u]++
	w := c.h / 4
	if int(i) >= len(c.itemSig)/w {
		c.hashItems(int(i) + 1)
	}
	sig := c.userSig[int(u)*w : int(u+1)*w]
	for k, h := range c.itemSig[int(i)*w : int(i+1)*w][:len(sig)] {
		sig[k] = minLanes(sig[k], h)
	}
}

// hashItems extends itemSig to the items below n: lane k%4 of word k/4 of
// item i is mix64(i ^ seed_k), top 16 bits.
func (c *sketchCooc) hashItems(n int) {
	for i := len(c.itemSig) / (c.h / 4); i < n; i++ {
		var word uint64
		for k, seed := range c.hashSeeds {
			word |= (mix64(uint64(i)^seed) >> 48) << (uint(k%4) * 16)
			if k%4 == 3 {
				c.itemSig = append(c.itemSig, word)
				word = 0
			}
		}
	}
}

// minLanes is the lane-by-lane minimum of the four unsigned 16-bit lanes
// of a and b.
func minLanes(a, b uint64) uint64 {
	// The top bit of each lane of low is set where a's low 15 bits are
	// at least b's: (a|top) − (b&^top) cannot borrow across lanes. a < b
	// where b's top bit alone is set, or where the top bits agree and a's
	// low bits are smaller.
	low := (a | laneHigh) - (b & laneLow)
	less := ((^a & b) | (^(a ^ b) & ^low)) & laneHigh
	take := (less >> 15) * 0xffff // 0xffff in each lane where a < b
	return a&take | b&^take
}

// exactCooc keeps sorted item sets per user and user lists per item.
type exactCooc struct {
	userItems [][]int32 // sorted
	itemUsers [][]int32 // sorted
}

func (c *exactCooc) reserve(nu, ni int) {
	c.userItems = reserveRows(c.userItems, nu)
	c.itemUsers = reserveRows(c.itemUsers, ni)
}

func (c *exactCooc) grow(nu, ni int) {
	for len(c.userItems) < nu {
		c.userItems = append(c.userItems, nil)
	}
	for len(c.itemUsers) < ni {
		c.itemUsers = append(c.itemUsers, nil)
	}
}

// dropUser removes user u from the sets of its items (stamping them), and
// empties its own.
func (c *exactCooc) dropUser(u int32, itemStamps []uint64, epoch uint64) {
	for _, i := range c.userItems[u] {
		c.itemUsers[i] = removeSorted(c.itemUsers[i], u)
		itemStamps[i] = epoch
	}
	c.userItems[u] = c.userItems[u][:0]
}

func (c *exactCooc) dropItem(i int32, userStamps []uint64, epoch uint64) {
	for _, u := range c.itemUsers[i] {
		c.userItems[u] = removeSorted(c.userItems[u], i)
		userStamps[u] = epoch
	}
	c.itemUsers[i] = c.itemUsers[i][:0]
}

// removeSorted removes v from the sorted s, if it is there.
func removeSorted(s []int32, v int32) []int32 {
	if k, found := slices.BinarySearch(s, v); found {
		return slices.Delete(s, k, k+1)
	}
	return s
}

func intersectsMoreThanOne(a, b []int32) bool {
	n := 0
	for x, y := 0, 0; x < len(a) && y < len(b); {
		switch {
		case a[x] < b[y]:
			x++
		case a[x] > b[y]:
			y++
		default:
			n++
			if n > 1 {
				return true
			}
			x++
			y++
		}
	}
	return false
}

func (c *exactCooc) count(u, i int32) float64 {
	n := 0
	for _, v := range c.itemUsers[i] {
		if v != u && intersectsMoreThanOne(c.userItems[u], c.userItems[v]) {
			n++
		}
	}
	return float64(n)
}

func insertSorted(s []int32, v int32) []int32 {
	k, found := slices.BinarySearch(s, v)
	if found {
		return s
	}
	return slices.Insert(s, k, v)
}

func (c *exactCooc) add(u, i int32, _ *rand.Rand) {
	c.userItems[u] = insertSorted(c.userItems[u], i)
	c.itemUsers[i] = insertSorted(c.itemUsers[i], u)
}

func (c *sketchCooc) copyInto(dst cooccurrence, users, items []rowSpan, nu, ni int) cooccurrence {
	d, ok := dst.(*sketchCooc)
	if !ok {
		d = &sketchCooc{}
		nu, ni, users, items = 0, 0, nil, nil
	}
	d.s, d.h, d.overlap, d.itemSig = c.s, c.h, c.overlap, c.itemSig[:len(c.itemSig):len(c.itemSig)]
	d.itemN = syncRows(d.itemN, c.itemN, 1, items, ni)
	d.itemRes = syncRows(d.itemRes, c.itemRes, c.s, items, ni)
	d.userN = syncRows(d.userN, c.userN, 1, users, nu)
	d.userSig = syncRows(d.userSig, c.userSig, c.h/4, users, nu)
	d.hashSeeds = append(d.hashSeeds[:0], c.hashSeeds...)
	return d
}

func (c *exactCooc) copyInto(dst cooccurrence, users, items []rowSpan, nu, ni int) cooccurrence {
	d, ok := dst.(*exactCooc)
	if !ok {
		d = &exactCooc{}
		nu, ni, users, items = 0, 0, nil, nil
	}
	d.userItems = syncSets(d.userItems, c.userItems, users, nu)
	d.itemUsers = syncSets(d.itemUsers, c.itemUsers, items, ni)
	return d
}

// syncSets is syncRows for rows of varying length: the listed and the new
// rows are copied into dst's own slices.
func syncSets(dst, src [][]int32, spans []rowSpan, n int) [][]int32 {
	for _, s := range spans {
		for r := int(s.lo); r < min(int(s.hi), n); r++ {
			dst[r] = append(dst[r][:0], src[r]...)
		}
	}
	dst = dst[:n]
	for _, s := range src[n:] {
		dst = append(dst, append([]int32(nil), s...))
	}
	return dst
}

// Encodings of the estimators (FORMAT.md, section COOC).
const (
	coocKindSketch uint8 = 0
	coocKindExact  uint8 = 1
)

func (c *sketchCooc) kind() uint8 { return coocKindSketch }

func (c *sketchCooc) encode(e *encoder) {
	e.uint32s(c.itemN)
	e.int32s(c.itemRes)
	e.uint32s(c.userN)
	e.uint64s(c.userSig)
}

func (c *sketchCooc) decode(d *decoder, nu, ni int) {
	c.itemN = d.uint32s(ni)
	c.itemRes = d.int32s(ni * c.s)
	c.userN = d.uint32s(nu)
	c.userSig = d.uint64s(nu * c.h / 4)
	for _, v := range c.itemRes {
		if v < -1 || int(v) >= nu {
			d.fail("user index %d in sketch", v)
			return
		}
	}
}

func (c *exactCooc) kind() uint8 { return coocKindExact }

func (c *exactCooc) encode(e *encoder) {
	for _, s := range c.userItems {
		e.u32(uint32(len(s)))
		e.int32s(s)
	}
	for _, s := range c.itemUsers {
		e.u32(uint32(len(s)))
		e.int32s(s)
	}
}

func (c *exactCooc) decode(d *decoder, nu, ni int) {
	c.grow(nu, ni)
	for u := 0; u < nu && d.err == nil; u++ {
		c.userItems[u] = d.int32s(int(d.u32()))
		checkIndices(d, c.userItems[u], ni)
	}
	for i := 0; i < ni && d.err == nil; i++ {
		c.itemUsers[i] = d.int32s(int(d.u32()))
		checkIndices(d, c.itemUsers[i], nu)
	}
}
