// Package movielens converts MovieLens rating files into the event format
// (JSON lines), so that a real rating log can be replayed like a click
// stream.
//
// It reads the ML-100k u.data layout: one rating per line, four
// whitespace-separated integer fields, user id, item id, rating and unix
// seconds. Each rating becomes
//
//	{"user":"196","item":"242","ts":881250949000,"event":"rating","rating":3}
//
// with the original ids kept as strings (so they still join with u.item and
// u.user), ts = seconds·1000, and no dwell_ms or truth field: the ground
// truth of a rating log is whatever protocol the evaluation chooses (for
// example "rating <= 2 is noise"). Events are sorted by (ts, user, item), so
// the stream is chronological and the order of equal timestamps is stable.
//
// A malformed line is an error naming the line: a converter feeding
// experiments should not guess. The whole file is held in memory to sort it
// (ML-100k: 100,000 ratings, a few MB).
package movielens
