package movielens

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// ErrFormat is wrapped by the error returned for a malformed input line.
var ErrFormat = errors.New("malformed movielens line")

// Rating is one line of u.data.
type Rating struct {
	User, Item int64
	Rating     int
	Seconds    int64
}

// AppendJSON appends the rating as one event-format JSON object and a
// newline.
func (r Rating) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"user":"`...)
	dst = strconv.AppendInt(dst, r.User, 10)
	dst = append(dst, `","item":"`...)
	dst = strconv.AppendInt(dst, r.Item, 10)
	dst = append(dst, `","ts":`...)
	dst = strconv.AppendInt(dst, r.Seconds*1000, 10)
	dst = append(dst, `,"event":"rating","rating":`...)
	dst = strconv.AppendInt(dst, int64(r.Rating), 10)
	return append(dst, "}\n"...)
}

// Stats describes a converted file.
type Stats struct {
	Events, Users, Items int
	// Ratings counts events by rating value.
	Ratings map[int]int
}

// Read parses u.data lines from r. Blank lines are skipped.
func Read(ctx context.Context, r io.Reader) ([]Rating, error) {
	sc := bufio.NewScanner(r)
	var out []Rating
	for line := 1; sc.Scan(); line++ {
		if line%65536 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("read ratings: %w", err)
			}
		}
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		rt, err := parse(text)
		if err != nil {
			return nil, fmt.Errorf("read ratings: line %d: %w", line, err)
		}
		out = append(out, rt)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read ratings: %w", err)
	}
	return out, nil
}

func parse(text string) (Rating, error) {
	f := strings.Fields(text)
	if len(f) != 4 {
		return Rating{}, fmt.Errorf("%w: want 4 fields (user item rating seconds), got %d", ErrFormat, len(f))
	}
	var (
		v    [4]int64
		name = [4]string{"user", "item", "rating", "seconds"}
	)
	for i, s := range f {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return Rating{}, fmt.Errorf("%w: %s %q is not an integer", ErrFormat, name[i], s)
		}
		v[i] = n
	}
	switch {
	case v[0] < 0 || v[1] < 0:
		return Rating{}, fmt.Errorf("%w: negative id", ErrFormat)
	case v[2] < 1 || v[2] > 10:
		return Rating{}, fmt.Errorf("%w: rating %d out of [1, 10]", ErrFormat, v[2])
	case v[3] < 0 || v[3] > 1<<40: // ms must fit comfortably in int64
		return Rating{}, fmt.Errorf("%w: timestamp %d out of range", ErrFormat, v[3])
	}
	return Rating{User: v[0], Item: v[1], Rating: int(v[2]), Seconds: v[3]}, nil
}

// Sort orders ratings by (time, user, item), the order Convert writes.
func Sort(rs []Rating) {
	slices.SortStableFunc(rs, func(a, b Rating) int {
		return cmp.Or(cmp.Compare(a.Seconds, b.Seconds), cmp.Compare(a.User, b.User), cmp.Compare(a.Item, b.Item))
	})
}

// Convert reads u.data from r and writes the sorted events to w, buffered.
func Convert(ctx context.Context, r io.Reader, w io.Writer) (Stats, error) {
	rs, err := Read(ctx, r)
	if err != nil {
		return Stats{}, err
	}
	Sort(rs)
	st := Stats{Events: len(rs), Ratings: make(map[int]int)}
	users := make(map[int64]struct{})
	items := make(map[int64]struct{})
	bw := bufio.NewWriterSize(w, 1<<16)
	var buf []byte
	for _, rt := range rs {
		users[rt.User] = struct{}{}
		items[rt.Item] = struct{}{}
		st.Ratings[rt.Rating]++
		buf = rt.AppendJSON(buf[:0])
		if _, err := bw.Write(buf); err != nil {
			return st, fmt.Errorf("write event: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return st, fmt.Errorf("flush events: %w", err)
	}
	st.Users, st.Items = len(users), len(items)
	return st, nil
}

// String is a one-line human summary.
func (s Stats) String() string {
	keys := make([]int, 0, len(s.Ratings))
	for k := range s.Ratings {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "%d events, %d users, %d items; ratings", s.Events, s.Users, s.Items)
	for _, k := range keys {
		fmt.Fprintf(&b, " %d:%d", k, s.Ratings[k])
	}
	return b.String()
}
