package eval

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"

	"denoiser/internal/movielens"
	"denoiser/online"
)

// newRand returns the generator for seed and a purpose tag, so that the
// split, the noise and every model draw from independent streams.
func newRand(seed, tag uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed^tag*0x2545f4914f6cdd1d, seed^online.SeedStream^tag))
}

// Interaction is one rating with dense user and item indices.
type Interaction struct {
	User, Item int32
	// Rating is 1..5 (the observed, possibly noise-injected, rating).
	Rating int
	// Clean is the rating before noise injection (equal to Rating when
	// none was injected).
	Clean   int
	Seconds int64
}

// Dataset is a set of interactions over Users × Items.
type Dataset struct {
	Users, Items int
	Rows         []Interaction
	// Events holds an event log's events (LoadEventLog), Events[n] that of
	// Rows[n], whose Seconds is n; nil for ratings.
	Events []online.Event
}

// UserID and ItemID are the string ids given to the online model.
func UserID(u int32) string { return "u" + strconv.Itoa(int(u)) }
func ItemID(i int32) string { return "i" + strconv.Itoa(int(i)) }

// LoadMovieLens reads a u.data or ratings.csv file (movielens.Read) and maps its ids to dense indices in
// ascending id order.
func LoadMovieLens(ctx context.Context, path string) (*Dataset, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load ratings: %w", err)
	}
	defer f.Close()
	rs, err := movielens.Read(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("load ratings %s: %w", path, err)
	}
	if len(rs) == 0 {
		return nil, fmt.Errorf("load ratings %s: no ratings", path)
	}
	return FromRatings(rs), nil
}

// FromRatings builds a Dataset from parsed ratings, ids mapped densely in
// ascending order. A rating's level is its class in rating mode
// (online.RatingClass: rounded half up, so half stars 0.5..5 become 1..5);
// one below 0.5, which no MovieLens file holds, is level 1.
func FromRatings(rs []movielens.Rating) *Dataset {
	us, is := denseIDs(rs)
	d := &Dataset{Users: len(us), Items: len(is), Rows: make([]Interaction, len(rs))}
	for k, r := range rs {
		d.Rows[k] = interaction(r, us, is)
	}
	return d
}

// interaction is r with its ids mapped by us and is.
func interaction(r movielens.Rating, us, is map[int64]int32) Interaction {
	level, ok := online.RatingClass(r.Rating, 10) // movielens reads ratings up to 10
	if !ok {
		level = 1
	}
	return Interaction{User: us[r.User], Item: is[r.Item], Rating: level, Clean: level, Seconds: r.Seconds}
}

// denseIDs maps the user and the item ids of rs to 0, 1, … in ascending
// id order.
func denseIDs(rs []movielens.Rating) (users, items map[int64]int32) {
	dense := func(get func(movielens.Rating) int64) map[int64]int32 {
		var ids []int64
		seen := map[int64]bool{}
		for _, r := range rs {
			if id := get(r); !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
		slices.Sort(ids)
		m := make(map[int64]int32, len(ids))
		for i, id := range ids {
			m[id] = int32(i)
		}
		return m
	}
	return dense(func(r movielens.Rating) int64 { return r.User }), dense(func(r movielens.Rating) int64 { return r.Item })
}

// Split modes.
const (
	SplitRandom = "random" // a seeded shuffle of interactions
	SplitChrono = "chrono" // by time: the oldest 80% train, then 10% / 10%
	// SplitDeca is the DeCA paper's fixed split of ML-100k (LoadDecaSplit):
	// the same for every seed.
	SplitDeca = "deca"
)

// Split is a division of a dataset into training, validation and test
// interactions.
type Split struct {
	Train, Valid, Test []Interaction
	// Seen are the interactions whose items are not ranked for their user
	// at test time: Train for the 8:1:1 splits, Train and Valid for
	// SplitDeca (DeCA's user_pos). A test item among them stays in the
	// user's relevant list, so it counts in Recall's denominator and can
	// never be a hit.
	Seen []Interaction
}

// SplitSizes returns the sizes of the 8:1:1 split of n interactions:
// train = floor(0.8 n), valid = floor(0.1 n), test the rest.
func SplitSizes(n int) (train, valid, test int) {
	train = n * 8 / 10
	valid = n / 10
	return train, valid, n - train - valid
}

// SplitData divides d.Rows 8:1:1, by a seeded shuffle (SplitRandom) or by
// time (SplitChrono, ties broken by user then item). Train is returned in
// time order in both modes, as a stream would deliver it.
func SplitData(d *Dataset, mode string, seed uint64) (Split, error) {
	rows := slices.Clone(d.Rows)
	switch mode {
	case SplitRandom:
		r := newRand(seed, 1)
		r.Shuffle(len(rows), func(a, b int) { rows[a], rows[b] = rows[b], rows[a] })
	case SplitChrono:
		SortByTime(rows)
	default:
		return Split{}, fmt.Errorf("split: unknown mode %q (use random or chrono)", mode)
	}
	nt, nv, _ := SplitSizes(len(rows))
	s := Split{Train: rows[:nt], Valid: rows[nt : nt+nv], Test: rows[nt+nv:]}
	SortByTime(s.Train)
	s.Seen = s.Train
	return s, nil
}

// SortByTime orders interactions by (seconds, user, item).
func SortByTime(rows []Interaction) {
	slices.SortStableFunc(rows, func(a, b Interaction) int {
		return cmp.Or(cmp.Compare(a.Seconds, b.Seconds), cmp.Compare(a.User, b.User), cmp.Compare(a.Item, b.Item))
	})
}

// CleanTest keeps the interactions rated at least minRating (the paper's
// clean test: rating 5 only).
func CleanTest(rows []Interaction, minRating int) []Interaction {
	var out []Interaction
	for _, r := range rows {
		if r.Rating >= minRating {
			out = append(out, r)
		}
	}
	return out
}
