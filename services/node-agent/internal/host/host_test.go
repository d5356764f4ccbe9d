package host

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
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
	m, err := ReadMountInfo(p)
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

func TestKindOf(t *testing.T) {
	for name, want := range map[string]string{
		"nvme0n1": KindNVMe, "nvme10n2": KindNVMe, "nvme0n1p1": "", "nvme0c0n1": "", "nvme0": "",
		"sda": KindSD, "sdaa": KindSD, "sda1": "", "vda": KindVD, "vda1": "", "xvdb": KindXVD, "xvdb1": "",
		"loop0": KindLoop, "loop0p1": "", "dm-0": "", "md0": "", "md127": "", "nbd0": "", "rbd0": "",
		"zram0": "", "ram0": "", "sr0": "", "mmcblk0": "", "hda": "",
	} {
		if got := KindOf(name); got != want {
			t.Errorf("KindOf(%s) = %q, want %q", name, got, want)
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

func TestValidateDeviceAllow(t *testing.T) {
	for _, ok := range [][]string{nil, {"/dev/loop7"}, {"/dev/nvme*n1", "/dev/sd[a-c]"}} {
		if err := ValidateDeviceAllow(ok); err != nil {
			t.Errorf("%v: %v", ok, err)
		}
	}
	for _, bad := range [][]string{{"loop7"}, {"/sys/block/sda"}, {"/dev/../etc/x"}, {"/dev/sd["}, {"/dev//sda"}} {
		if err := ValidateDeviceAllow(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// TestOfferedBy: nothing is offered by default; a device glob, a by-id glob or a model glob
// offers a disk and says which entry did.
func TestOfferedBy(t *testing.T) {
	nvme := Disk{Path: "/dev/nvme1n1", Model: "Amazon EC2 NVMe Instance Storage"}
	links := []string{"/dev/disk/by-id/nvme-Amazon_EC2_NVMe_Instance_Storage_AWS1234"}
	if got := offeredBy(Config{}, nvme, links); got != "" {
		t.Fatalf("an empty allowlist offers %q", got)
	}
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{DeviceAllow: []string{"/dev/loop*", "/dev/nvme*n1"}}, "device:/dev/nvme*n1"},
		{Config{DeviceAllowByID: []string{"/dev/disk/by-id/nvme-Amazon_EC2_NVMe_Instance_Storage_*"}}, "by-id:/dev/disk/by-id/nvme-Amazon_EC2_NVMe_Instance_Storage_*"},
		{Config{DeviceAllowModel: []string{"nvme_card", "Amazon EC2 NVMe Instance Storage"}}, "model:Amazon EC2 NVMe Instance Storage"},
		{Config{DeviceAllow: []string{"/dev/sd*"}, DeviceAllowByID: []string{"/dev/disk/by-id/google-*"}, DeviceAllowModel: []string{"Microsoft NVMe Direct Disk*"}}, ""},
	} {
		if got := offeredBy(c.cfg, nvme, links); got != c.want {
			t.Errorf("%+v: offered by %q, want %q", c.cfg, got, c.want)
		}
	}
	if got := offeredBy(Config{DeviceAllowModel: []string{"*"}}, Disk{Path: "/dev/loop3"}, nil); got != "" {
		t.Errorf("a disk without a model is offered by a model glob: %q", got)
	}
	for _, bad := range [][]string{{"/dev/nvme0n1"}, {"/dev/disk/by-id/../x"}, {"/dev/disk/by-id/["}} {
		if err := ValidateDeviceAllowByID(bad); err == nil {
			t.Errorf("by-id %v accepted", bad)
		}
	}
	if err := ValidateDeviceAllowModel([]string{"Amazon EC2 NVMe Instance Storage", "Microsoft NVMe Direct Disk*"}); err != nil {
		t.Error(err)
	}
	if err := ValidateDeviceAllowModel([]string{" "}); err == nil {
		t.Error("an empty model glob accepted")
	}
}

// TestOpenBeneath resolves without root: symlinks and escapes are refused, missing
// directories are made beneath the root only.
func TestOpenBeneath(t *testing.T) {
	root := filepath.Join(t.TempDir(), "pv")
	outside := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "real"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real", filepath.Join(root, "relative")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "file"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	fd, err := openBeneath(root, filepath.Join(root, "real", "a", "b"), true)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
	if st, err := os.Stat(filepath.Join(root, "real", "a", "b")); err != nil || !st.IsDir() {
		t.Fatalf("not created: %v", err)
	}
	for _, target := range []string{
		filepath.Join(root, "link"), filepath.Join(root, "link", "x"), filepath.Join(root, "relative", "x"),
		filepath.Join(root, "file", "x"), root + "/../escape", filepath.Join(outside, "x"), root + "x/y",
	} {
		if fd, err := openBeneath(root, target, true); !errors.Is(err, ErrUnsafePath) {
			if err == nil {
				unix.Close(fd)
			}
			t.Errorf("%s: %v, want %v", target, err, ErrUnsafePath)
		}
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Fatalf("created outside the root: %v", entries)
	}
	h := &Host{}
	if err := h.CheckBeneath(root, filepath.Join(root, "missing", "x")); err != nil {
		t.Fatalf("a missing target: %v", err)
	}
	if err := h.CheckBeneath(root, filepath.Join(root, "link", "x")); !errors.Is(err, ErrUnsafePath) {
		t.Fatalf("through a symlink: %v", err)
	}
	// The fallback walk (kernels before openat2) refuses the same.
	openat2Missing.Store(true)
	defer openat2Missing.Store(false)
	if _, err := openBeneath(root, filepath.Join(root, "link", "x"), true); !errors.Is(err, ErrUnsafePath) {
		t.Fatalf("fallback through a symlink: %v", err)
	}
	if fd, err := openBeneath(root, filepath.Join(root, "real", "c"), true); err != nil {
		t.Fatalf("fallback: %v", err)
	} else {
		unix.Close(fd)
	}
}

// TestKernelReadsTable: a loop device attached without partscan never gets its partitions
// from the kernel, so the agent registers them at once; any other device may.
func TestKernelReadsTable(t *testing.T) {
	sys := t.TempDir()
	for name, partscan := range map[string]string{"loop3": "0\n", "loop4": "1\n"} {
		if err := os.MkdirAll(filepath.Join(sys, "block", name, "loop"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sys, "block", name, "loop", "partscan"), []byte(partscan), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h := &Host{cfg: Config{SysRoot: sys}}
	for dev, want := range map[string]bool{"/dev/loop3": false, "/dev/loop4": true, "/dev/nvme0n1": true} {
		if got := h.kernelReadsTable(dev); got != want {
			t.Errorf("kernelReadsTable(%s) = %v, want %v", dev, got, want)
		}
	}
}
