//go:build linux

// Package disktest gives tests a small filesystem of their own to fill: a
// tmpfs mounted for the test, and a ballast file that takes its last free
// byte. Mounting needs root (CI runs the tests as root); elsewhere the test
// is skipped with the reason.
package disktest

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// Tmpfs mounts a tmpfs of size bytes on a new directory and returns it; it
// is unmounted when the test ends. The test is skipped when it does not run
// as root or the mount fails.
func Tmpfs(t testing.TB, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs (CI runs the tests as root)")
	}
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+strconv.FormatInt(size, 10), "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		// Lazy: a process the test started may still hold files there.
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// Remount remounts the filesystem mounted on dir with option ("ro", "rw").
func Remount(t testing.TB, dir, option string) {
	t.Helper()
	if out, err := exec.Command("mount", "-o", "remount,"+option, dir).CombinedOutput(); err != nil {
		t.Fatalf("remount %s %s: %v: %s", dir, option, err, out)
	}
}

// Fill writes a ballast file in dir until its filesystem has no free byte
// left, and returns the file's path; removing it frees the space again.
func Fill(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "ballast")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for i := 0; ; i++ {
		if i > 1<<20 { // a terabyte: the filesystem is not the small one
			t.Fatalf("%s does not fill", dir)
		}
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill %s: %v", dir, err)
			}
			break
		}
	}
	if free := Free(t, dir); free != 0 {
		t.Fatalf("%s still has %d bytes free after the ballast", dir, free)
	}
	return path
}

// Free returns the bytes of dir's filesystem an unprivileged process may
// still allocate.
func Free(t testing.TB, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// Used returns the bytes the files under dir occupy (allocated blocks);
// files removed while it walks do not count.
func Used(t testing.TB, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if errors.Is(err, os.ErrNotExist) {
			return nil // removed while walked
		}
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			n += st.Blocks * 512
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
