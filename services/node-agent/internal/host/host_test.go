package host

import (
	"os"
	"path/filepath"
	"testing"
)

func TestReadMountInfo(t *testing.T) {
	const table = `26 1 254:0 / / rw,relatime - ext4 /dev/vda rw
27 26 7:3 / /var/lib/agent/mounts/u rw,noatime shared:1 - xfs /dev/loop3 rw
28 26 7:3 / /mnt/pv\040with\040space rw - xfs /dev/loop3 rw
bad line
`
	p := filepath.Join(t.TempDir(), "mountinfo")
	if err := os.WriteFile(p, []byte(table), 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := readMountInfo(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 3 {
		t.Fatalf("parsed %d mounts: %v", len(m), m)
	}
	if m[1].MajMin != "7:3" || m[1].FSType != "xfs" || m[1].Source != "/dev/loop3" || m[1].MountPoint != "/var/lib/agent/mounts/u" {
		t.Fatalf("optional fields confused the parser: %+v", m[1])
	}
	if m[2].MountPoint != "/mnt/pv with space" {
		t.Fatalf("escapes: %q", m[2].MountPoint)
	}
}

func TestCountCPUs(t *testing.T) {
	for in, want := range map[string]int64{"0": 1, "0-3": 4, "0-3,8": 5, "0-1,4-5": 4, "": 0} {
		if got := countCPUs(in); got != want {
			t.Errorf("countCPUs(%q) = %d, want %d", in, got, want)
		}
	}
}

func TestPartitionPath(t *testing.T) {
	for disk, want := range map[string]string{"/dev/sda": "/dev/sda2", "/dev/nvme0n1": "/dev/nvme0n1p2", "/dev/loop7": "/dev/loop7p2"} {
		if got := PartitionPath(disk, 2); got != want {
			t.Errorf("PartitionPath(%s) = %s, want %s", disk, got, want)
		}
	}
}
