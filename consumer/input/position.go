package input

import (
	"cmp"
	"strconv"
	"strings"
)

// Position is a place in the input. A Kafka position has Topic, Partition
// and Offset set and File empty; a file position has File and Line set
// (Line counts from 1; Offset is the byte offset of the line's start) and
// Topic empty.
//
// A record's position names the record itself. The positions a checkpoint
// or a snapshot keeps, and those a source starts from or commits, name the
// NEXT record to read of each partition: Offset is the next offset. That is
// why the JSON name of Offset is "next": positions only reach JSON in
// `denoiser snapshot inspect --json`, as resume points.
type Position struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"next"`

	File string `json:"file,omitempty"`
	Line int64  `json:"line,omitempty"`
}

// IsFile reports whether p is a file position (as opposed to a Kafka one).
func (p Position) IsFile() bool { return p.Topic == "" }

// String formats p as "file:line" or "topic/partition@offset".
func (p Position) String() string {
	if p.IsFile() {
		return p.File + ":" + strconv.FormatInt(p.Line, 10)
	}
	return p.Topic + "/" + strconv.FormatInt(int64(p.Partition), 10) + "@" + strconv.FormatInt(p.Offset, 10)
}

// ComparePartitions orders Kafka positions by topic, then partition,
// ignoring offsets: the order in which checkpoints and snapshots list their
// positions, at most one per partition.
func ComparePartitions(a, b Position) int {
	return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
}
