// Package movielens converts MovieLens rating files into the event format
// (JSON lines), so that a real rating log can be replayed like a click
// stream.
//
// It reads two layouts, told apart by the first line:
//
//   - ML-100k u.data: one rating per line, four whitespace-separated
//     fields, user id, item id, rating and unix seconds;
//   - ratings.csv of MovieLens latest, 20M, 25M and 32M: the header
//     userId,movieId,rating,timestamp (CSVHeader), then the same four
//     fields separated by commas, ratings in half stars from 0.5 to 5.0.
//
// Ids and seconds are integers; a rating is a decimal number in (0, 10]
// (3, 3.5, 4.0). Each rating becomes
//
//	{"user":"196","item":"242","ts":881250949000,"event":"rating","rating":3}
//
// with the rating in its shortest form (3.5 stays 3.5, 4.0 becomes 4),
// the original ids kept as strings (so they still join with u.item and
// u.user), ts = seconds·1000, and no dwell_ms or truth field: the ground
// truth of a rating log is whatever protocol the evaluation chooses (for
// example "rating <= 2 is noise"). Events are sorted by (ts, user, item), so
// the stream is chronological and the order of equal timestamps is stable.
//
// Either may be gzip-compressed (told by its magic bytes). A malformed
// line is an error naming the line, and an input without a rating is an
// error too (ErrNoRatings): a converter feeding experiments should not
// guess. The whole file is held in memory to sort it
// (ML-100k: 100,000 ratings, a few MB; ML-25M: 25 million, about 1 GB).
package movielens
