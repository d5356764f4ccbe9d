package host

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Mount is one line of a mountinfo table.
type Mount struct {
	MajMin     string
	Root       string
	MountPoint string
	FSType     string
	Source     string
}

// Mounts reads the agent's own mount table.
func (h *Host) Mounts() ([]Mount, error) { return ReadMountInfo(h.cfg.MountInfo) }

// BootDisks names the disks that hold the host's /, /boot or /boot/efi, from the host's
// mount table (the agent's own "/" is a container overlay).
func (h *Host) BootDisks() (map[string]bool, error) {
	boot := map[string]bool{}
	for _, table := range []string{h.cfg.BootMountInfo, h.cfg.MountInfo} {
		mounts, err := ReadMountInfo(table)
		if err != nil {
			continue // either table may be unreadable; the other still answers
		}
		for _, m := range mounts {
			if m.MountPoint != "/" && m.MountPoint != "/boot" && m.MountPoint != "/boot/efi" {
				continue
			}
			if disk := h.diskOfMajMin(m.MajMin); disk != "" {
				boot[disk] = true
			}
		}
	}
	return boot, nil
}

// ReadMountInfo parses a mountinfo table (proc(5)), octal escapes undone.
func ReadMountInfo(path string) ([]Mount, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading mount table: %w", err)
	}
	defer f.Close()
	var mounts []Mount
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" {
				sep = i
				break
			}
		}
		if len(fields) < 5 || sep < 0 || len(fields) < sep+3 {
			continue
		}
		mounts = append(mounts, Mount{
			MajMin:     fields[2],
			Root:       unescape(fields[3]),
			MountPoint: unescape(fields[4]),
			FSType:     fields[sep+1],
			Source:     unescape(fields[sep+2]),
		})
	}
	return mounts, sc.Err()
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// MountedAt returns the mount of target in the agent's namespace, if any.
func (h *Host) MountedAt(target string) (Mount, bool, error) {
	mounts, err := h.Mounts()
	if err != nil {
		return Mount{}, false, err
	}
	var found Mount
	ok := false
	for _, m := range mounts {
		if m.MountPoint == target {
			found, ok = m, true // the last one wins: it is the one visible
		}
	}
	return found, ok, nil
}
