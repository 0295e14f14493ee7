package cli

import (
	"flag"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// HelpWidth is the column at which command help is wrapped.
const HelpWidth = 80

// Wrap breaks text into lines of at most width columns (a single word
// longer than that keeps its own line), each starting with indent.
// Newlines in text start new paragraphs.
func Wrap(text string, width int, indent string) string {
	var b strings.Builder
	for i, para := range strings.Split(text, "\n") {
		if i > 0 {
			b.WriteByte('\n')
		}
		line := indent
		for _, word := range strings.Fields(para) {
			if line != indent && len(line)+1+len(word) > width {
				b.WriteString(line)
				b.WriteByte('\n')
				line = indent
			}
			if line != indent {
				line += " "
			}
			line += word
		}
		if line != indent {
			b.WriteString(line)
		}
	}
	return b.String()
}

// PrintFlags writes the flags of fs, as flag.PrintDefaults does but with
// two dashes and each flag's help wrapped at width.
func PrintFlags(w io.Writer, fs *flag.FlagSet, width int) {
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		head := "  --" + f.Name
		if name != "" {
			head += " " + name
		}
		if !isZeroDefault(f) {
			usage += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintf(w, "%s\n%s\n", head, Wrap(usage, width, "        "))
	})
}

// isZeroDefault reports whether f's default is its type's zero value, which
// the help does not print (as flag.PrintDefaults).
func isZeroDefault(f *flag.Flag) bool {
	t := reflect.TypeOf(f.Value)
	var z reflect.Value
	if t.Kind() == reflect.Pointer {
		z = reflect.New(t.Elem())
	} else {
		z = reflect.Zero(t)
	}
	if v, ok := z.Interface().(flag.Value); ok && f.DefValue == v.String() {
		return true
	}
	return f.DefValue == "" || f.DefValue == "0" || f.DefValue == "false" || f.DefValue == "[]"
}
