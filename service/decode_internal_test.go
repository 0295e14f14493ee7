package service

import (
	"os"
	"strings"
	"testing"
)

// TestMisindented: a line indented as no key above it is, or more than a
// line that opens no block, or with a tab, is named with its own line
// number (the YAML parser names a line before it); well-formed YAML,
// block lists, list items with keys under them and block scalars
// included, names none.
func TestMisindented(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		line       int
		why        string
	}{
		{"more than a sibling", "kafka:\n  brokers: [a]\n   input_topic: x\n", 3, "more than the line before it"},
		{"less than a sibling", "kafka:\n  brokers: [a]\n input_topic: x\nlog:\n  level: info\n", 3, "by 1 space, as no key"},
		{"between two blocks", "kafka:\n  brokers: [a]\nlog:\n    level: info\n  format: json\n", 5, "as no key above it is"},
		{"a tab", "kafka:\n  brokers: [a]\n\tinput_topic: x\n", 3, "tab"},
		{"well formed", "# c\nkafka:\n  brokers:\n    - 127.0.0.1:9092\n    - 127.0.0.1:9093\n  input_topic: x   # a comment\n\nmodel:\n  event_order:\n  - return\n  - view\nlog:\n  level: info\n", 0, ""},
		{"list items with keys", "a:\n  - name: x\n    value: y\n  - name: z\n    value: w\nb: 1\n", 0, ""},
		{"a block scalar", "a: |\n  one\n    two\n  three\nb: 1\n", 0, ""},
	} {
		line, why := misindented([]byte(tc.text))
		if line != tc.line || !strings.Contains(why, tc.why) {
			t.Errorf("%s: line %d %q, want line %d %q", tc.name, line, why, tc.line, tc.why)
		}
	}
	// The examples the documentation gives parse, and name nothing.
	for _, doc := range []string{"../README.md", "../docs/operations.md"} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, block := range strings.Split(string(b), "```yaml\n")[1:] {
			block, _, _ = strings.Cut(block, "```")
			if line, why := misindented([]byte(block)); line != 0 {
				t.Errorf("%s: a yaml block's line %d %s:\n%s", doc, line, why, block)
			}
		}
	}
}
