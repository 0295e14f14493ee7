package eval

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"denoiser/internal/movielens"
)

// The files of the DeCA paper's split of MovieLens 100K
// (github.com/wangyu-ustc/DeCA, data/ml-100k/), each "user \t item \t
// rating" per line.
const (
	// DecaTrainFile holds every training interaction, all ratings 1–5
	// (noisy positives).
	DecaTrainFile = "ml-100k.train.rating"
	// DecaValidFile holds the clean (rating-5) validation interactions.
	DecaValidFile = "ml-100k.valid.rating"
	// DecaTestFile holds the clean (rating-5) test interactions; despite
	// its name it lists positives only. Every validation pair is in it too.
	DecaTestFile = "ml-100k.test.negative"
)

// DecaSource says where the DeCA split comes from; no data set ships with
// the repository.
const DecaSource = "the DeCA split of MovieLens 100K is the folder data/ml-100k/ of https://github.com/wangyu-ustc/DeCA " +
	"(files " + DecaTrainFile + ", " + DecaValidFile + ", " + DecaTestFile + ")"

// LoadDeca reads DecaTrainFile from dir. The file carries no time, so
// Seconds is the line's index: sorting by time keeps the file order.
func LoadDeca(ctx context.Context, dir string) (*Dataset, error) {
	rs, err := readDecaFile(ctx, filepath.Join(dir, DecaTrainFile))
	if err != nil {
		return nil, fmt.Errorf("load deca: %w", err)
	}
	return FromRatings(rs), nil
}

// LoadDecaSplit reads the three files of the DeCA split from dir. The
// dataset holds the training interactions (ids mapped as by LoadDeca); the
// split's Train is its rows in file order, Valid and Test the other two
// files mapped through the same ids, and Seen is Train followed by Valid:
// DeCA ranks for the test every item outside the user's training and
// validation items. A validation or test id absent from the training file
// is an error.
func LoadDecaSplit(ctx context.Context, dir string) (*Dataset, Split, error) {
	path := filepath.Join(dir, DecaTrainFile)
	rs, err := readDecaFile(ctx, path)
	if err != nil {
		return nil, Split{}, fmt.Errorf("load deca split: %w", err)
	}
	users, items := denseIDs(rs)
	d := &Dataset{Users: len(users), Items: len(items), Rows: make([]Interaction, len(rs))}
	for k, r := range rs {
		d.Rows[k] = interaction(r, users, items)
	}
	sp := Split{Train: d.Rows}
	for _, f := range []struct {
		name string
		dst  *[]Interaction
	}{{DecaValidFile, &sp.Valid}, {DecaTestFile, &sp.Test}} {
		path := filepath.Join(dir, f.name)
		rs, err := readDecaFile(ctx, path)
		if err != nil {
			return nil, Split{}, fmt.Errorf("load deca split: %w", err)
		}
		for k, r := range rs {
			_, uok := users[r.User]
			_, iok := items[r.Item]
			if !uok || !iok {
				return nil, Split{}, fmt.Errorf("load deca split %s:%d: user %d or item %d has no training interaction", path, k+1, r.User, r.Item)
			}
			*f.dst = append(*f.dst, interaction(r, users, items))
		}
	}
	sp.Seen = append(append(make([]Interaction, 0, len(sp.Train)+len(sp.Valid)), sp.Train...), sp.Valid...)
	return d, sp, nil
}

// readDecaFile reads one file of the split: "user \t item \t rating" per
// line, ratings 1..5, blank lines skipped. Seconds is the row's index. A
// missing file's error says where the split comes from.
func readDecaFile(ctx context.Context, path string) ([]movielens.Rating, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w (%s)", err, DecaSource)
	}
	if err != nil {
		return nil, err
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
			return nil, fmt.Errorf("%s:%d: %d fields, want user item rating", path, line, len(fields))
		}
		var v [3]int64
		for k, s := range fields {
			if v[k], err = strconv.ParseInt(s, 10, 64); err != nil {
				return nil, fmt.Errorf("%s:%d: %w", path, line, err)
			}
		}
		if v[2] < 1 || v[2] > 5 {
			return nil, fmt.Errorf("%s:%d: rating %d outside 1..5", path, line, v[2])
		}
		rs = append(rs, movielens.Rating{User: v[0], Item: v[1], Rating: float64(v[2]), Seconds: int64(len(rs))})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(rs) == 0 {
		return nil, fmt.Errorf("%s: no ratings", path)
	}
	return rs, nil
}
