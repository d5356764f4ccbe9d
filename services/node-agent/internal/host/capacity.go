package host

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Capacity returns online CPUs in millicores and MemTotal in bytes.
func (h *Host) Capacity() (cpuMillis, memoryBytes int64) {
	cpus := countCPUs(readTrim(filepath.Join(h.cfg.SysRoot, "devices", "system", "cpu", "online")))
	if b, err := os.ReadFile(h.cfg.MemInfo); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				f := strings.Fields(rest)
				if len(f) > 0 {
					kb, _ := strconv.ParseInt(f[0], 10, 64)
					memoryBytes = kb * 1024
				}
			}
		}
	}
	return cpus * 1000, memoryBytes
}

// countCPUs counts a cpulist such as "0-3,8".
func countCPUs(list string) int64 {
	var n int64
	for _, r := range strings.Split(list, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		a, err := strconv.ParseInt(lo, 10, 64)
		if err != nil {
			continue
		}
		if !isRange {
			n++
			continue
		}
		b, err := strconv.ParseInt(hi, 10, 64)
		if err == nil && b >= a {
			n += b - a + 1
		}
	}
	return n
}

// FilesystemUsage returns the size of the filesystem mounted at target and the bytes left
// to an unprivileged writer (statfs: blocks and available blocks, times the block size).
func (h *Host) FilesystemUsage(target string) (size, avail int64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(target, &st); err != nil {
		return 0, 0, err
	}
	return int64(st.Blocks) * st.Bsize, int64(st.Bavail) * st.Bsize, nil //nolint:gosec // block counts of a real filesystem fit
}
