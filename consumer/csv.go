package consumer

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// CSVSource reads events from CSV with a header line, one record per line
// (a quoted field may hold commas and quotes, not line breaks), and hands
// each row on as the JSON object of the event format: the header names the
// fields (`user,item,ts,event,dwell_ms,rating,truth`, and any others, which
// the output carries through). A cell that is a JSON number is written as
// one, any other as a string; an empty cell is absent. A row that is not
// CSV, or has more or fewer cells than the header, is rejected as not_json
// with its line. Positions are the file's lines, the header being line 1.
type CSVSource struct {
	lines  *FileSource
	header []string
	cells  []string // the current row's cells
	buf    []byte   // the current row as JSON
	err    error    // the header's error, returned by every Next
	fields Fields   // the columns of user and item, for the header's check
	rows   uint64   // the rows after the header that were not blank, for Describe
}

// NewCSVSource reads CSV from lines (a FileSource: gzip and line limits as
// there), whose fields are the columns fields names (Fields; zero: the
// event format's names). The header is read on the first Next.
func NewCSVSource(lines *FileSource, fields Fields) *CSVSource {
	return &CSVSource{lines: lines, fields: fields}
}

// Ready reports whether the next row is buffered (FileSource.Ready).
func (s *CSVSource) Ready() bool { return s.err == nil && s.lines.Ready() }

// Next returns the next row as a JSON object.
func (s *CSVSource) Next(ctx context.Context) (Message, error) {
	if s.err != nil {
		return Message{}, s.err
	}
	if s.header == nil {
		m, err := s.lines.Next(ctx)
		if err != nil {
			return Message{}, err
		}
		if why := unreadableText(m.Value); why != "" {
			s.err = fmt.Errorf("read %s: %s", s.lines.name, why)
			return Message{}, s.err
		}
		if s.header, err = splitCSV(m.Value, nil); err != nil || len(bytes.TrimSpace(m.Value)) == 0 {
			s.err = fmt.Errorf("read %s: the first line is not a CSV header (user,item,...): %q", s.lines.name, clip(m.Value))
			return Message{}, s.err
		}
		for i, name := range s.header {
			s.header[i] = strings.TrimSpace(name) // "user, item, ts"
		}
		if why := badHeader(s.header, s.fields.names()); why != "" {
			s.err = fmt.Errorf("read %s: the first line %q is not a CSV header of the event format: %s", s.lines.name, clip(m.Value), why)
			return Message{}, s.err
		}
		// A setting that names a column the header lacks (a misspelling:
		// fields.ts=timestmp) would leave that field unread on every row.
		for i, name := range s.fields.names() {
			if name != fieldNames[i] && !slices.Contains(s.header, name) {
				s.err = fmt.Errorf("read %s: fields.%s names the column %q, which the header %q lacks: name one of its columns", s.lines.name, fieldNames[i], name, clip(m.Value))
				return Message{}, s.err
			}
		}
	}
	m, err := s.lines.Next(ctx)
	if err != nil || len(bytes.TrimSpace(m.Value)) == 0 || m.Size > 0 || m.Err != nil {
		if err == nil && len(bytes.TrimSpace(m.Value)) > 0 {
			s.rows++ // a line too long or cut short is a row the dead letters hold
		}
		return m, err // end, a blank line to skip, a line too long to decode, or one cut short
	}
	s.rows++
	s.cells, err = splitCSV(m.Value, s.cells[:0])
	switch {
	case err != nil:
		m.Err = reject(ReasonNotJSON, "", "not a CSV row: "+err.Error())
		return m, nil
	case len(s.cells) != len(s.header):
		m.Err = reject(ReasonNotJSON, "", strconv.Itoa(len(s.cells))+" cells, the header has "+strconv.Itoa(len(s.header)))
		return m, nil
	case s.isHeader(s.cells):
		// Files joined with their headers: the column names are no event.
		m.Err = reject(ReasonNotJSON, "", "the header again (files joined with their first lines?), not an event")
		return m, nil
	}
	s.buf = append(s.buf[:0], '{')
	for i, cell := range s.cells {
		if cell == "" {
			continue
		}
		if len(s.buf) > 1 {
			s.buf = append(s.buf, ',')
		}
		s.buf = strconv.AppendQuote(s.buf, s.header[i])
		s.buf = append(s.buf, ':')
		if n := strings.TrimSpace(cell); isJSONNumber(n) { // " 4 ": spaces around a number
			s.buf = append(s.buf, n...)
		} else {
			q, _ := json.Marshal(cell) // valid JSON for any string
			s.buf = append(s.buf, q...)
		}
	}
	m.Value = append(s.buf, '}')
	return m, nil
}

// isHeader reports whether cells are the header's names again.
func (s *CSVSource) isHeader(cells []string) bool {
	for i, c := range cells {
		if strings.TrimSpace(c) != s.header[i] {
			return false
		}
	}
	return true
}

// badHeader says what is wrong with a CSV header that names no user or
// item column, "" if nothing is: the usual causes, a file without a
// header, another separator, other names (MovieLens' ratings.csv).
func badHeader(header []string, names [numFields]string) string {
	for i, h := range header {
		if slices.Contains(header[:i], h) {
			return "it names the column " + strconv.Quote(h) + " twice; a row's cells would be read into one member"
		}
	}
	if slices.Contains(header, names[fieldUser]) && slices.Contains(header, names[fieldItem]) {
		return ""
	}
	if names != fieldNames {
		return "it names no " + names[fieldUser] + " and " + names[fieldItem] + " column, which fields.user and fields.item name"
	}
	line := strings.Join(header, ",")
	switch lower := strings.ToLower(line); {
	case len(header) == 1 && strings.ContainsAny(line, "\t;|"):
		return "its columns are not separated by commas; only commas are read (convert the separators, e.g. " + separatorHint(line) + ")"
	case strings.Contains(lower, "userid") && strings.Contains(lower, "movieid"):
		return "it is MovieLens' ratings.csv: convert it with denoiser-lab convert movielens --in ratings.csv --out events.jsonl"
	case slices.ContainsFunc(header, isJSONNumber):
		return "it holds numbers, so the file has no header; add a first line naming the columns (user,item,ts,...)"
	case slices.ContainsFunc(header, func(h string) bool { return strings.EqualFold(h, "user") || strings.EqualFold(h, "item") }):
		return "names are case-sensitive; the columns must be named user and item (user,item,ts,...)"
	}
	why := "it names no user and item column; name them user and item (user,item,ts,...)"
	var renames, sets []string
	var named []string // the fields a --set below reads already
	for _, a := range Aliases {
		if slices.Contains(header, a.Name) && !slices.Contains(header, a.Field) {
			renames = append(renames, a.Name+" to "+a.Field)
			if !slices.Contains(named, a.Field) {
				named = append(named, a.Field)
				sets = append(sets, "--set fields."+a.Field+"="+a.Name)
			}
		}
	}
	if len(renames) > 0 {
		why += ": rename " + strings.Join(renames, ", ") + ", or read them with " + strings.Join(sets, " ")
	}
	return why
}

// separatorHint is the command that turns line's separator (a tab, a
// semicolon or a bar, whichever it holds most of) into commas.
func separatorHint(line string) string {
	best, most := "\\t", strings.Count(line, "\t")
	for _, sep := range []string{";", "|"} {
		if n := strings.Count(line, sep); n > most {
			best, most = sep, n
		}
	}
	hint := "tr '" + best + "' ','"
	if best == ";" {
		// Semicolons mostly separate where a comma is the decimal mark
		// (3,5): turn those into points first, or the rows gain cells.
		hint = "sed 's/,/./g; s/;/,/g' (a decimal comma, 3,5, becomes 3.5 first; quote cells that hold commas of their own)"
	}
	return hint
}

// BytesRead and Size are the underlying file's, for progress displays.
func (s *CSVSource) BytesRead() int64 { return s.lines.BytesRead() }

// Size is the underlying file's size, -1 when unknown.
func (s *CSVSource) Size() int64 { return s.lines.Size() }

// Describe says what the start of the input looks like.
func (s *CSVSource) Describe() string {
	switch {
	case s.err != nil:
		return s.err.Error()
	case s.header == nil:
		return s.lines.Describe()
	case s.rows == 0:
		return "the CSV has a header (" + strconv.Quote(clip([]byte(strings.Join(s.header, ",")))) + ") and no row after it"
	}
	return "no row of the CSV could be scored (header " + strconv.Quote(clip([]byte(strings.Join(s.header, ",")))) + "); the dead letters say why"
}

// Close closes the underlying file.
func (s *CSVSource) Close() error { return s.lines.Close() }

// splitCSV parses one CSV line into dst.
func splitCSV(line []byte, dst []string) ([]string, error) {
	r := csv.NewReader(bytes.NewReader(line))
	r.FieldsPerRecord = -1
	rec, err := r.Read()
	if err != nil {
		return dst, err
	}
	return append(dst, rec...), nil
}

// isJSONNumber reports whether s is a number as JSON writes one.
func isJSONNumber(s string) bool {
	if s == "" || (s[0] != '-' && (s[0] < '0' || s[0] > '9')) {
		return false
	}
	return json.Valid([]byte(s))
}
