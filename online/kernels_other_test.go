//go:build !amd64 || purego

package online

type kernelSet struct {
	name string
	use  func() (restore func())
}

// kernelSets is the Go loops alone: the build has no assembly.
func kernelSets() []kernelSet {
	return []kernelSet{{"Go", func() func() { return func() {} }}}
}
