package main

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// envAsDenoiser makes the test binary run as the denoiser command itself
// (os.Args[1:] are its arguments): the crash and shutdown tests start the
// `run` process this way, so that the binary they kill is built from the
// code under test.
const envAsDenoiser = "DNTEST_AS_DENOISER"

func TestMain(m *testing.M) {
	if os.Getenv(envAsDenoiser) == "1" {
		main()
		return
	}
	goleak.VerifyTestMain(m)
}
