package testenv

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Sweep kills control-plane processes from bin that lost their test process (their parent
// is now init) and removes the scratch directories no live process uses. The API server
// goes first: stopping etcd under it makes it hang.
func Sweep(bin string) {
	abs, err := filepath.Abs(bin)
	if err != nil {
		return
	}
	var apiservers, others []int
	live := map[string]bool{}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		for _, arg := range strings.Split(string(cmdline), "\x00") {
			for _, prefix := range scratchPrefixes {
				if i := strings.Index(arg, prefix); i >= 0 {
					live[scratchDir(arg[i:])] = true
				}
			}
		}
		exe, err := os.Readlink(filepath.Join("/proc", p.Name(), "exe"))
		if err != nil || filepath.Dir(exe) != abs || parentPID(pid) != 1 {
			continue
		}
		if filepath.Base(exe) == "kube-apiserver" {
			apiservers = append(apiservers, pid)
		} else {
			others = append(others, pid)
		}
	}
	for _, pid := range append(apiservers, others...) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		time.Sleep(50 * time.Millisecond)
	}
	for _, prefix := range scratchPrefixes {
		dirs, _ := filepath.Glob(prefix + "*")
		for _, d := range dirs {
			// A directory just made by a test that is still starting has no process yet.
			if !live[d] && olderThan(d, 2*time.Minute) {
				_ = os.RemoveAll(d)
			}
		}
	}
}

// scratchPrefixes are where envtest and Start keep their temporary files.
var scratchPrefixes = []string{
	filepath.Join(os.TempDir(), "k8s_test_framework_"),
	filepath.Join(os.TempDir(), "opsuite-testenv-"),
}

func scratchDir(path string) string {
	rest := strings.TrimPrefix(path, os.TempDir()+"/")
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		rest = rest[:i]
	}
	return filepath.Join(os.TempDir(), rest)
}

func olderThan(path string, age time.Duration) bool {
	fi, err := os.Stat(path)
	return err == nil && time.Since(fi.ModTime()) > age
}

func parentPID(pid int) int {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	// The command name is in parentheses and may hold spaces; fields follow the last ')'.
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(fields[1])
	return ppid
}
