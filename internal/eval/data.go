package eval

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

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
	us := dense(func(r movielens.Rating) int64 { return r.User })
	is := dense(func(r movielens.Rating) int64 { return r.Item })
	d := &Dataset{Users: len(us), Items: len(is), Rows: make([]Interaction, len(rs))}
	for k, r := range rs {
		level, ok := online.RatingClass(r.Rating, 10) // movielens reads ratings up to 10
		if !ok {
			level = 1
		}
		d.Rows[k] = Interaction{User: us[r.User], Item: is[r.Item], Rating: level, Clean: level, Seconds: r.Seconds}
	}
	return d
}

// Split modes.
const (
	SplitRandom = "random" // a seeded shuffle of interactions
	SplitChrono = "chrono" // by time: the oldest 80% train, then 10% / 10%
)

// Split is the 8:1:1 division of a dataset.
type Split struct {
	Train, Valid, Test []Interaction
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

// DecaTrainFile is the training file of the DeCA paper's split of
// MovieLens 100K (github.com/wangyu-ustc/DeCA, data/ml-100k/).
const DecaTrainFile = "ml-100k.train.rating"

// LoadDeca reads DecaTrainFile from dir: "user \t item \t rating" per line,
// no timestamps. The file carries no time, so Seconds is the line's index:
// sorting by time keeps the file order.
func LoadDeca(ctx context.Context, dir string) (*Dataset, error) {
	path := filepath.Join(dir, DecaTrainFile)
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load deca: %w", err)
	}
	defer f.Close()
	var rs []movielens.Rating
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		if line%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		if len(fields) != 3 {
			return nil, fmt.Errorf("load deca %s:%d: %d fields, want user item rating", path, line, len(fields))
		}
		var v [3]int64
		for k, s := range fields {
			if v[k], err = strconv.ParseInt(s, 10, 64); err != nil {
				return nil, fmt.Errorf("load deca %s:%d: %w", path, line, err)
			}
		}
		if v[2] < 1 || v[2] > 5 {
			return nil, fmt.Errorf("load deca %s:%d: rating %d outside 1..5", path, line, v[2])
		}
		rs = append(rs, movielens.Rating{User: v[0], Item: v[1], Rating: float64(v[2]), Seconds: int64(len(rs))})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("load deca %s: %w", path, err)
	}
	if len(rs) == 0 {
		return nil, fmt.Errorf("load deca %s: no ratings", path)
	}
	return FromRatings(rs), nil
}
