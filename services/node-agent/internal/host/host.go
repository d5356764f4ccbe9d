// Package host is the only package of the node agent that runs commands or touches the
// node's filesystems, devices and kernel settings. Everything above it decides; this package
// only does, so that the dangerous surface is small enough to read in one sitting.
package host

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// RequiredTools maps each command the agent runs to the Debian package that ships it.
var RequiredTools = map[string]string{
	"blkid":    "util-linux",
	"wipefs":   "util-linux",
	"sfdisk":   "fdisk",
	"mkfs.xfs": "xfsprogs",
}

// Config says where the host's pseudo filesystems are; tests and containers move them.
type Config struct {
	// SysRoot is sysfs, normally /sys.
	SysRoot string
	// DevRoot is where device nodes live, normally /dev.
	DevRoot string
	// MountInfo is the mount table of the agent's own mount namespace.
	MountInfo string
	// BootMountInfo is the mount table that shows the host's root filesystem; in a pod with
	// hostPID that is /proc/1/mountinfo.
	BootMountInfo string
	// MemInfo is /proc/meminfo.
	MemInfo string
	// SysctlRoot is /proc/sys, or a directory standing in for it.
	SysctlRoot string
	// DeviceAllow, when not empty, is the only set of devices the agent may ever see: globs
	// (path.Match) over device paths such as /dev/loop7 or /dev/nvme*n1. A disk matching none
	// is left out of Disks and refused by DiskByPath.
	DeviceAllow []string
}

// DefaultConfig is the layout of a normal Linux host.
func DefaultConfig() Config {
	return Config{
		SysRoot:       "/sys",
		DevRoot:       "/dev",
		MountInfo:     "/proc/self/mountinfo",
		BootMountInfo: "/proc/1/mountinfo",
		MemInfo:       "/proc/meminfo",
		SysctlRoot:    "/proc/sys",
	}
}

// Host runs the agent's commands and system calls.
type Host struct {
	cfg Config
}

// New checks that every required command is installed, so that a missing package shows at
// start-up rather than halfway through preparing a disk.
func New(cfg Config) (*Host, error) {
	if err := CheckTools(); err != nil {
		return nil, err
	}
	return &Host{cfg: cfg}, nil
}

// CheckTools reports every missing command together with the package to install.
func CheckTools() error {
	var missing []string
	for _, tool := range []string{"blkid", "wipefs", "sfdisk", "mkfs.xfs"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, fmt.Sprintf("%s (apt-get install %s)", tool, RequiredTools[tool]))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing commands: %s", strings.Join(missing, ", "))
	}
	return nil
}

// Disk is a whole block device as sysfs describes it.
type Disk struct {
	Name      string
	Path      string
	MajMin    string
	SizeBytes int64
	Model     string
	// Serial and WWN identify the hardware where it has an identity (loop devices do not).
	Serial     string
	WWN        string
	Rotational bool
	ReadOnly   bool
	// DiskSeq is the kernel's sequence number of the media now behind this name: within one
	// boot no two media get the same one (a re-attached loop device gets a new one). 0 when
	// the kernel does not count.
	DiskSeq uint64
	// Kind is the whole-disk family by name (see KindOf); "" for anything else.
	Kind       string
	Holders    []string
	Partitions []Part
}

// NVMe says whether the disk is an NVMe namespace.
func (d Disk) NVMe() bool { return d.Kind == KindNVMe }

// Whole-disk kinds, told apart by the kernel's name.
const (
	KindNVMe = "nvme" // nvme<ctrl>n<ns>: a namespace, not nvme0c0n1 (a multipath leg) nor a partition
	KindSD   = "sd"   // SCSI, SATA, SAS, USB disks
	KindVD   = "vd"   // virtio-blk
	KindXVD  = "xvd"  // Xen and some EC2 volumes
	KindLoop = "loop" // for tests only
)

var kindPatterns = []struct {
	kind string
	re   *regexp.Regexp
}{
	{KindNVMe, regexp.MustCompile(`^nvme[0-9]+n[0-9]+$`)},
	{KindSD, regexp.MustCompile(`^sd[a-z]+$`)},
	{KindVD, regexp.MustCompile(`^vd[a-z]+$`)},
	{KindXVD, regexp.MustCompile(`^xvd[a-z]+$`)},
	{KindLoop, regexp.MustCompile(`^loop[0-9]+$`)},
}

// KindOf names the whole-disk kind of a kernel block device name, "" when it is none of them
// (device-mapper, md, nbd, rbd, zram, ram, optical drives, partitions, ...). An allowlist: a
// new kind of device is refused until someone decides it is a disk.
func KindOf(name string) string {
	for _, k := range kindPatterns {
		if k.re.MatchString(name) {
			return k.kind
		}
	}
	return ""
}

// ErrNotAllowed means a device lies outside Config.DeviceAllow.
var ErrNotAllowed = errors.New("outside the agent's device allowlist")

// visible says whether the allowlist lets the agent see the device of this name.
func (h *Host) visible(name string) bool {
	if len(h.cfg.DeviceAllow) == 0 {
		return true
	}
	p := filepath.Join(h.cfg.DevRoot, name)
	for _, g := range h.cfg.DeviceAllow {
		if ok, _ := path.Match(g, p); ok {
			return true
		}
	}
	return false
}

// ValidateDeviceAllow checks allowlist globs: each must be a valid pattern of a path under /dev.
func ValidateDeviceAllow(globs []string) error {
	for _, g := range globs {
		if !strings.HasPrefix(g, "/dev/") || path.Clean(g) != g {
			return fmt.Errorf("device glob %q is not a clean path under /dev/", g)
		}
		if _, err := path.Match(g, "/dev/x"); err != nil {
			return fmt.Errorf("device glob %q: %w", g, err)
		}
	}
	return nil
}

// Part is a partition of a Disk.
type Part struct {
	Name      string
	Path      string
	MajMin    string
	Number    int
	SizeBytes int64
}

// Disks lists whole block devices of non-zero size, with their partitions.
func (h *Host) Disks() ([]Disk, error) {
	entries, err := os.ReadDir(filepath.Join(h.cfg.SysRoot, "block"))
	if err != nil {
		return nil, fmt.Errorf("listing block devices: %w", err)
	}
	var disks []Disk
	for _, e := range entries {
		if !h.visible(e.Name()) {
			continue
		}
		if readInt(filepath.Join(h.cfg.SysRoot, "block", e.Name(), "size")) == 0 {
			continue // unattached loop devices and empty drives have nothing to report
		}
		d, err := h.disk(e.Name())
		if err != nil {
			return nil, err
		}
		if d.SizeBytes == 0 {
			continue // unattached loop devices and empty drives have nothing to report
		}
		disks = append(disks, d)
	}
	return disks, nil
}

// ErrNotDisk means a path is not a whole block device known to sysfs.
var ErrNotDisk = errors.New("not a whole block device")

// DiskByPath resolves a device path (following symlinks such as /dev/disk/by-id) to its disk.
func (h *Host) DiskByPath(p string) (Disk, error) {
	resolved, err := filepath.EvalSymlinks(p)
	if err != nil {
		return Disk{}, fmt.Errorf("%s: %w", p, ErrNotDisk)
	}
	name := filepath.Base(resolved)
	if _, err := os.Stat(filepath.Join(h.cfg.SysRoot, "block", name)); err != nil {
		return Disk{}, fmt.Errorf("%s: %w", p, ErrNotDisk)
	}
	if !h.visible(name) {
		return Disk{}, fmt.Errorf("%s: %w", p, ErrNotAllowed)
	}
	return h.disk(name)
}

func (h *Host) disk(name string) (Disk, error) {
	dir := filepath.Join(h.cfg.SysRoot, "block", name)
	d := Disk{
		Name:       name,
		Path:       filepath.Join(h.cfg.DevRoot, name),
		MajMin:     readTrim(filepath.Join(dir, "dev")),
		SizeBytes:  readInt(filepath.Join(dir, "size")) * 512,
		Model:      readTrim(filepath.Join(dir, "device", "model")),
		Serial:     readTrim(filepath.Join(dir, "device", "serial")),
		Rotational: readTrim(filepath.Join(dir, "queue", "rotational")) == "1",
		ReadOnly:   readTrim(filepath.Join(dir, "ro")) == "1",
		WWN:        readTrim(filepath.Join(dir, "wwid")),
		Kind:       KindOf(name),
	}
	d.DiskSeq, _ = strconv.ParseUint(readTrim(filepath.Join(dir, "diskseq")), 10, 64)
	if d.Serial == "" {
		d.Serial = readTrim(filepath.Join(dir, "serial")) // virtio exposes it here
	}
	if d.WWN == "" {
		d.WWN = readTrim(filepath.Join(dir, "device", "wwid")) // SCSI
	}
	if holders, err := os.ReadDir(filepath.Join(dir, "holders")); err == nil {
		for _, hd := range holders {
			d.Holders = append(d.Holders, hd.Name())
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return Disk{}, fmt.Errorf("reading %s: %w", dir, err)
	}
	for _, e := range entries {
		pdir := filepath.Join(dir, e.Name())
		if !strings.HasPrefix(e.Name(), name) {
			continue
		}
		num := readTrim(filepath.Join(pdir, "partition"))
		if num == "" {
			continue
		}
		n, _ := strconv.Atoi(num)
		d.Partitions = append(d.Partitions, Part{
			Name:      e.Name(),
			Path:      filepath.Join(h.cfg.DevRoot, e.Name()),
			MajMin:    readTrim(filepath.Join(pdir, "dev")),
			Number:    n,
			SizeBytes: readInt(filepath.Join(pdir, "size")) * 512,
		})
	}
	return d, nil
}

// PartitionPath names partition n of a disk the way the kernel does.
func PartitionPath(diskPath string, n int) string {
	last := diskPath[len(diskPath)-1]
	if last >= '0' && last <= '9' {
		return fmt.Sprintf("%sp%d", diskPath, n)
	}
	return fmt.Sprintf("%s%d", diskPath, n)
}

// Signature is what blkid -p finds on a device; empty fields mean nothing was found.
type Signature struct {
	Type       string // filesystem or container type: xfs, ext4, LVM2_member, linux_raid_member
	Label      string
	UUID       string
	PTType     string // partition table: gpt, dos
	PTUUID     string
	Usage      string
	Ambivalent bool
}

// Empty says whether blkid found nothing at all.
func (s Signature) Empty() bool {
	return s.Type == "" && s.PTType == "" && !s.Ambivalent
}

// Probe reads signatures with blkid -p, which looks at the device itself instead of a udev
// cache (there is none in a container).
func (h *Host) Probe(ctx context.Context, dev string) (Signature, error) {
	out, err := run(ctx, "blkid", "-p", "-o", "export", dev)
	var exitErr *exec.ExitError
	var cmdErr *CommandError
	if errors.As(err, &cmdErr) && cmdErr.Stderr != "" {
		// blkid exits 2 ("nothing found") also when it could not read the device: an
		// unreadable device must never pass for a blank one.
		return Signature{}, err
	}
	if errors.As(err, &exitErr) {
		switch exitErr.ExitCode() {
		case 2: // nothing found
			return Signature{}, nil
		case 8: // more than one signature: treat as foreign data
			return Signature{Ambivalent: true, Type: "ambivalent"}, nil
		}
	}
	if err != nil {
		return Signature{}, err
	}
	var s Signature
	for _, line := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		switch k {
		case "TYPE":
			s.Type = v
		case "LABEL":
			s.Label = v
		case "UUID":
			s.UUID = v
		case "PTTYPE":
			s.PTType = v
		case "PTUUID":
			s.PTUUID = v
		case "USAGE":
			s.Usage = v
		}
	}
	return s, nil
}

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

// diskOfMajMin maps a device number to its whole disk's name, "" when not a block device.
func (h *Host) diskOfMajMin(majmin string) string {
	link, err := filepath.EvalSymlinks(filepath.Join(h.cfg.SysRoot, "dev", "block", majmin))
	if err != nil {
		return ""
	}
	if _, err := os.Stat(filepath.Join(link, "partition")); err == nil {
		return filepath.Base(filepath.Dir(link))
	}
	return filepath.Base(link)
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

// ErrBusy means the kernel refused exclusive access: the device is mounted (in any mount
// namespace), or held by device-mapper, md or another exclusive opener.
var ErrBusy = errors.New("device is busy")

// CheckExclusive opens the device with O_EXCL, which the kernel refuses while anything holds
// it; this sees mounts of other namespaces that no mount table of ours shows.
func (h *Host) CheckExclusive(dev string) error {
	fd, err := unix.Open(dev, unix.O_RDONLY|unix.O_EXCL|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.EBUSY) {
		return ErrBusy
	}
	if err != nil {
		return fmt.Errorf("opening %s: %w", dev, err)
	}
	return unix.Close(fd)
}

// PartitionSplit writes a fresh GPT with an XFS partition of xfsPercent of the device and a
// raw partition with the rest, under the given disk GUID so the agent can later recognise
// its own table. It returns the two partition paths once their device nodes exist.
func (h *Host) PartitionSplit(ctx context.Context, d Disk, xfsPercent uint32, diskGUID string) (p1, p2 string, err error) {
	err = h.withMedia(d, func() error {
		p1, p2, err = h.partitionSplit(ctx, d, xfsPercent, diskGUID)
		return err
	})
	return p1, p2, err
}

func (h *Host) partitionSplit(ctx context.Context, d Disk, xfsPercent uint32, diskGUID string) (string, string, error) {
	const align = 2048 // 1 MiB in 512-byte sectors
	sectors := d.SizeBytes / 512
	usable := sectors - align - 34 // the backup GPT takes the last 33 sectors
	xfsSectors := usable * int64(xfsPercent) / 100 / align * align
	script := fmt.Sprintf("label: gpt\nlabel-id: %s\n"+
		"start=%d, size=%d, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4, name=\"opsuite-xfs\"\n"+
		"start=%d, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4, name=\"opsuite-raw\"\n",
		diskGUID, align, xfsSectors, align+xfsSectors)
	cmd := exec.CommandContext(ctx, "sfdisk", "--wipe", "always", "--wipe-partitions", "always", "--quiet", d.Path)
	cmd.Stdin = strings.NewReader(script)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", "", fmt.Errorf("sfdisk %s: %w: %s", d.Path, err, strings.TrimSpace(stderr.String()))
	}
	p1, p2 := PartitionPath(d.Path, 1), PartitionPath(d.Path, 2)
	if h.kernelReadsTable(d.Path) && waitForNodes(ctx, 2*time.Second, p1, p2) {
		return p1, p2, nil
	}
	// The kernel did not parse the new table (no GPT support built in): tell it where the
	// partitions are, exactly as written above.
	if err := registerPartitions(ctx, d.Path, p1, p2); err != nil {
		return "", "", err
	}
	return p1, p2, nil
}

// RegisterSplit makes the kernel know the two partitions of a disk the agent split, when it
// did not parse the table itself (no GPT support built in, as after a reboot of such a kernel).
// The table is read back from the disk; the media is checked to be the one identified.
func (h *Host) RegisterSplit(ctx context.Context, d Disk) error {
	return h.withMedia(d, func() error {
		return registerPartitions(ctx, d.Path, PartitionPath(d.Path, 1), PartitionPath(d.Path, 2))
	})
}

// kernelReadsTable says whether the kernel may read a new partition table of dev itself:
// never for a loop device attached without partscan (its sysfs loop/partscan is 0), whose
// partitions are then registered at once instead of after a wait.
func (h *Host) kernelReadsTable(dev string) bool {
	b, err := os.ReadFile(filepath.Join(h.cfg.SysRoot, "block", filepath.Base(dev), "loop", "partscan"))
	return err != nil || strings.TrimSpace(string(b)) != "0"
}

func registerPartitions(ctx context.Context, dev, p1, p2 string) error {
	fd, err := unix.Open(dev, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening %s: %w", dev, err)
	}
	defer unix.Close(fd)
	parts, err := readTable(ctx, dev)
	if err != nil {
		return err
	}
	if len(parts) != 2 {
		return fmt.Errorf("%s holds %d partitions, want 2", dev, len(parts))
	}
	for i, p := range parts {
		if err := addPartition(fd, int32(i+1), p.Start*512, p.Size*512); err != nil {
			return fmt.Errorf("adding partition %d of %s: %w", i+1, dev, err)
		}
	}
	if waitForNodes(ctx, 10*time.Second, p1, p2) {
		return nil
	}
	return fmt.Errorf("partitions of %s did not appear", dev)
}

type tableEntry struct {
	Start int64  `json:"start"`
	Size  int64  `json:"size"`
	UUID  string `json:"uuid"`
}

// PartitionUUID is the GPT partition GUID of partition n (from 1) of dev, in lowercase as
// udev names it under /dev/disk/by-partuuid: unlike the partition's kernel name it stays
// with the partition.
func (h *Host) PartitionUUID(ctx context.Context, dev string, n int) (string, error) {
	parts, err := readTable(ctx, dev)
	if err != nil {
		return "", err
	}
	if n < 1 || n > len(parts) {
		return "", fmt.Errorf("%s holds %d partitions, no partition %d", dev, len(parts), n)
	}
	if parts[n-1].UUID == "" {
		return "", fmt.Errorf("partition %d of %s has no partition GUID (not a GPT table)", n, dev)
	}
	return strings.ToLower(parts[n-1].UUID), nil
}

// readTable reads back the partition table as written, in 512-byte sectors.
func readTable(ctx context.Context, dev string) ([]tableEntry, error) {
	out, err := run(ctx, "sfdisk", "--json", dev)
	if err != nil {
		return nil, err
	}
	var t struct {
		PartitionTable struct {
			SectorSize int64        `json:"sectorsize"`
			Partitions []tableEntry `json:"partitions"`
		} `json:"partitiontable"`
	}
	if err := json.Unmarshal([]byte(out), &t); err != nil {
		return nil, fmt.Errorf("parsing sfdisk --json %s: %w", dev, err)
	}
	if ss := t.PartitionTable.SectorSize; ss != 0 && ss != 512 {
		for i := range t.PartitionTable.Partitions {
			t.PartitionTable.Partitions[i].Start *= ss / 512
			t.PartitionTable.Partitions[i].Size *= ss / 512
		}
	}
	return t.PartitionTable.Partitions, nil
}

// waitForNodes waits for device nodes, which the kernel creates asynchronously.
func waitForNodes(ctx context.Context, timeout time.Duration, paths ...string) bool {
	deadline := time.Now().Add(timeout)
	for {
		all := true
		for _, p := range paths {
			if _, err := os.Stat(p); err != nil {
				all = false
			}
		}
		if all {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// DeviceSize returns a block device's size from the kernel.
func (h *Host) DeviceSize(dev string) (int64, error) {
	fd, err := unix.Open(dev, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("opening %s: %w", dev, err)
	}
	defer unix.Close(fd)
	var size uint64
	if err := ioctlGetSize(fd, &size); err != nil {
		return 0, fmt.Errorf("sizing %s: %w", dev, err)
	}
	return int64(size), nil
}

// MkfsXFS makes an XFS filesystem with the agent's label and a UUID chosen by the agent, so the
// filesystem can be recognised even when the device's name changes. -f is safe here because
// the caller has already proven the device blank or the agent's own.
func (h *Host) MkfsXFS(ctx context.Context, d Disk, dev, label, uuid string) error {
	return h.withMedia(d, func() error {
		_, err := run(ctx, "mkfs.xfs", "-f", "-q", "-L", label, "-m", "uuid="+uuid, dev)
		return err
	})
}

// Wipe erases every signature on the disk, the given partitions first, and makes the kernel
// forget the old partitions; the media is checked to be the one the caller identified.
func (h *Host) Wipe(ctx context.Context, d Disk, partitions []string) error {
	return h.withMedia(d, func() error { return h.wipe(ctx, d.Path, partitions) })
}

func (h *Host) wipe(ctx context.Context, dev string, partitions []string) error {
	for _, p := range partitions {
		if _, err := os.Stat(p); err != nil {
			continue
		}
		if _, err := run(ctx, "wipefs", "-a", "-q", p); err != nil {
			return err
		}
	}
	if _, err := run(ctx, "wipefs", "-a", "-q", dev); err != nil {
		return err
	}
	return h.RereadPartitions(dev)
}

// ErrMediaChanged means a device name now stands for other media than the caller identified.
var ErrMediaChanged = errors.New("the device now holds other media than the one identified")

// withMedia runs a write while holding the disk open, after checking that its media is still
// the one d describes (same disk sequence number). The open descriptor pins the media: a loop
// device cannot be re-attached to another file under the agent until it is closed.
func (h *Host) withMedia(d Disk, write func() error) error {
	fd, err := unix.Open(d.Path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening %s: %w", d.Path, err)
	}
	defer unix.Close(fd)
	if d.DiskSeq != 0 {
		seq, err := diskSeq(fd)
		if err != nil {
			return fmt.Errorf("reading the disk sequence of %s: %w", d.Path, err)
		}
		if seq != d.DiskSeq {
			return fmt.Errorf("%s (sequence %d, identified %d): %w", d.Path, seq, d.DiskSeq, ErrMediaChanged)
		}
	}
	return write()
}

// BootID identifies the running boot; disk sequence numbers mean something only within one.
func (h *Host) BootID() (string, error) {
	id := readTrim(filepath.Join(h.cfg.SysctlRoot, "kernel", "random", "boot_id"))
	if id == "" {
		return "", errors.New("reading the boot id: kernel/random/boot_id is empty or missing")
	}
	return id, nil
}

// RereadPartitions asks the kernel to drop or re-read the partition table.
func (h *Host) RereadPartitions(dev string) error {
	fd, err := unix.Open(dev, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening %s: %w", dev, err)
	}
	defer unix.Close(fd)
	// Loop devices without partition scanning answer EINVAL; they have no partitions to drop.
	if err := unix.IoctlSetInt(fd, unix.BLKRRPART, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("re-reading partitions of %s: %w", dev, err)
	}
	return nil
}

// MountXFS mounts the XFS filesystem on dev (d itself or one of its partitions) at target,
// resolved and created beneath root without following symlinks. The media is checked to be
// the one the caller identified.
func (h *Host) MountXFS(d Disk, dev, root, target string) error {
	return h.withMedia(d, func() error {
		return mountBeneath(root, target, func(at string) error {
			if err := unix.Mount(dev, at, "xfs", unix.MS_NOATIME, ""); err != nil {
				return fmt.Errorf("mounting %s at %s: %w", dev, target, err)
			}
			return nil
		})
	})
}

// BindMount bind-mounts source (a directory of the agent's own) at target, resolved and
// created beneath root without following symlinks, and mounted onto the resolved descriptor so
// that a symlink swapped in meanwhile cannot redirect it.
func (h *Host) BindMount(source, root, target string) error {
	return mountBeneath(root, target, func(at string) error {
		if err := unix.Mount(source, at, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind-mounting %s at %s: %w", source, target, err)
		}
		return nil
	})
}

// RemoveDir removes an empty directory the agent created; a missing one is fine.
func (h *Host) RemoveDir(dir string) error {
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
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

// ReadState reads the agent's state file; a missing file reads as nil.
func (h *Host) ReadState(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

// WriteState replaces the state file atomically and durably: a crash leaves the old or the
// new state, never a torn one.
func (h *Host) WriteState(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".state-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// MkdirAll creates a directory the agent owns.
func (h *Host) MkdirAll(dir string) error { return os.MkdirAll(dir, 0o750) }

func run(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			return stdout.String(), &CommandError{Cmd: name, Args: args, Stderr: strings.TrimSpace(stderr.String()), exit: exitErr}
		}
		if errors.Is(err, exec.ErrNotFound) {
			return "", fmt.Errorf("%s not found: apt-get install %s", name, RequiredTools[name])
		}
		return "", fmt.Errorf("%s: %w", name, err)
	}
	return stdout.String(), nil
}

// CommandError is a command that ran and failed.
type CommandError struct {
	Cmd    string
	Args   []string
	Stderr string
	exit   *exec.ExitError
}

func (e *CommandError) Error() string {
	return fmt.Sprintf("%s %s: %v: %s", e.Cmd, strings.Join(e.Args, " "), e.exit, e.Stderr)
}

// Unwrap exposes the exit status.
func (e *CommandError) Unwrap() error { return e.exit }

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func readInt(path string) int64 {
	n, _ := strconv.ParseInt(readTrim(path), 10, 64)
	return n
}
