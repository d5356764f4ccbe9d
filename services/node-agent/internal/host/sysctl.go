package host

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// BootID identifies the running boot; disk sequence numbers mean something only within one.
func (h *Host) BootID() (string, error) {
	id := readTrim(filepath.Join(h.cfg.SysctlRoot, "kernel", "random", "boot_id"))
	if id == "" {
		return "", errors.New("reading the boot id: kernel/random/boot_id is empty or missing")
	}
	return id, nil
}

// ReadSysctl reads a dotted sysctl such as vm.max_map_count.
func (h *Host) ReadSysctl(name string) (int64, error) {
	b, err := os.ReadFile(h.sysctlPath(name))
	if err != nil {
		return 0, fmt.Errorf("reading sysctl %s: %w", name, err)
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parsing sysctl %s: %w", name, err)
	}
	return v, nil
}

// WriteSysctl sets a dotted sysctl.
func (h *Host) WriteSysctl(name string, value int64) error {
	// O_TRUNC matters for the regular file that stands in for /proc/sys in tests.
	f, err := os.OpenFile(h.sysctlPath(name), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return fmt.Errorf("writing sysctl %s: %w", name, err)
	}
	if _, err := f.WriteString(strconv.FormatInt(value, 10) + "\n"); err != nil {
		f.Close()
		return fmt.Errorf("writing sysctl %s: %w", name, err)
	}
	return f.Close()
}

func (h *Host) sysctlPath(name string) string {
	return filepath.Join(h.cfg.SysctlRoot, strings.ReplaceAll(name, ".", "/"))
}
