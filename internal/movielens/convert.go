package movielens

import (
	"bufio"
	"bytes"
	"cmp"
	"compress/gzip"
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

// ErrNoRatings is returned by Convert for an input that holds no rating
// (an empty file, blank lines, a header alone): an empty output would
// look like a conversion that worked.
var ErrNoRatings = errors.New("no rating in the input")

// CSVHeader is the first line of a ratings.csv (MovieLens latest, 20M,
// 25M, 32M); Read tells the two layouts apart by it.
const CSVHeader = "userId,movieId,rating,timestamp"

// Rating is one rating of either layout.
type Rating struct {
	User, Item int64
	// Rating is a decimal number in (0, 10]: 1..5 in u.data, 0.5..5.0 in
	// half stars in ratings.csv.
	Rating  float64
	Seconds int64
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
	dst = strconv.AppendFloat(dst, r.Rating, 'f', -1, 64) // 3.5, and 4 for 4.0
	return append(dst, "}\n"...)
}

// Stats describes a converted file.
type Stats struct {
	Events, Users, Items int
	// Ratings counts events by rating value.
	Ratings map[float64]int
}

// Read parses ratings from r in either layout: ratings.csv when its first
// non-blank line is CSVHeader (a UTF-8 byte-order mark before it is
// skipped), u.data otherwise. Blank lines are skipped. Gzip, told by its
// magic bytes, is read as what it holds (u.data.gz).
func Read(ctx context.Context, r io.Reader) ([]Rating, error) {
	br := bufio.NewReader(r)
	if magic, _ := br.Peek(2); bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("read ratings: gzip: %w", err)
		}
		defer zr.Close()
		r = zr
	} else {
		r = br
	}
	sc := bufio.NewScanner(r)
	var (
		out    []Rating
		csv    bool
		header = true // no data line read yet: the next one may be the header
	)
	for line := 1; sc.Scan(); line++ {
		if line%65536 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("read ratings: %w", err)
			}
		}
		text := strings.TrimSpace(sc.Text())
		if header {
			text = strings.TrimPrefix(text, "\ufeff")
		}
		if text == "" {
			continue
		}
		if header {
			header = false
			if text == CSVHeader {
				csv = true
				continue
			}
		}
		var (
			rt  Rating
			err error
		)
		if csv {
			rt, err = parseCSV(text)
		} else {
			rt, err = parse(text)
		}
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

// parse reads a u.data line: user item rating seconds, separated by white
// space.
func parse(text string) (Rating, error) {
	f := strings.Fields(text)
	if len(f) != 4 {
		if strings.Contains(text, ",") {
			return Rating{}, fmt.Errorf("%w: comma-separated, but the file does not start with the ratings.csv header %s", ErrFormat, CSVHeader)
		}
		return Rating{}, fmt.Errorf("%w: want 4 fields (user item rating seconds), got %d", ErrFormat, len(f))
	}
	return parseFields(f)
}

// parseCSV reads a ratings.csv line: userId,movieId,rating,timestamp.
func parseCSV(text string) (Rating, error) {
	if text == CSVHeader {
		return Rating{}, fmt.Errorf("%w: a second header", ErrFormat)
	}
	f := strings.Split(text, ",")
	if len(f) != 4 {
		return Rating{}, fmt.Errorf("%w: want 4 comma-separated fields (%s), got %d", ErrFormat, CSVHeader, len(f))
	}
	return parseFields(f)
}

// parseFields checks the four fields of a rating, in either layout.
func parseFields(f []string) (Rating, error) {
	var (
		v    [4]int64
		name = [4]string{"user", "item", "rating", "seconds"}
	)
	for i, s := range f {
		if i == 2 {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return Rating{}, fmt.Errorf("%w: %s %q is not an integer", ErrFormat, name[i], s)
		}
		v[i] = n
	}
	text := strings.TrimSpace(f[2])
	rating, err := strconv.ParseFloat(text, 64)
	if err != nil || !isDecimal(strings.TrimPrefix(text, "-")) { // a negative one is out of range, below
		return Rating{}, fmt.Errorf("%w: rating %q is not a decimal number", ErrFormat, f[2])
	}
	switch {
	case v[0] < 0 || v[1] < 0:
		return Rating{}, fmt.Errorf("%w: negative id", ErrFormat)
	case !(rating > 0 && rating <= 10):
		return Rating{}, fmt.Errorf("%w: rating %s out of (0, 10]", ErrFormat, text)
	case v[3] < 0 || v[3] > 1<<40: // ms must fit comfortably in int64
		return Rating{}, fmt.Errorf("%w: timestamp %d out of range", ErrFormat, v[3])
	}
	return Rating{User: v[0], Item: v[1], Rating: rating, Seconds: v[3]}, nil
}

// isDecimal reports whether s is digits with at most one decimal point
// between them (3, 3.5, 4.0): no sign, exponent, hex, Inf or NaN.
func isDecimal(s string) bool {
	digits, point := 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits++
		case c == '.' && !point && digits > 0 && i < len(s)-1:
			point = true
		default:
			return false
		}
	}
	return digits > 0
}

// Sort orders ratings by (time, user, item), the order Convert writes.
func Sort(rs []Rating) {
	slices.SortStableFunc(rs, func(a, b Rating) int {
		return cmp.Or(cmp.Compare(a.Seconds, b.Seconds), cmp.Compare(a.User, b.User), cmp.Compare(a.Item, b.Item))
	})
}

// Convert reads ratings (u.data or ratings.csv) from r and writes the sorted events to w, buffered.
func Convert(ctx context.Context, r io.Reader, w io.Writer) (Stats, error) {
	rs, err := Read(ctx, r)
	if err != nil {
		return Stats{}, err
	}
	if len(rs) == 0 {
		return Stats{}, fmt.Errorf("read ratings: %w (an empty file, or a header alone)", ErrNoRatings)
	}
	Sort(rs)
	st := Stats{Events: len(rs), Ratings: make(map[float64]int)}
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
	keys := make([]float64, 0, len(s.Ratings))
	for k := range s.Ratings {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "%d events, %d users, %d items; ratings", s.Events, s.Users, s.Items)
	for _, k := range keys {
		fmt.Fprintf(&b, " %s:%d", strconv.FormatFloat(k, 'f', -1, 64), s.Ratings[k])
	}
	return b.String()
}
