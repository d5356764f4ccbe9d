package host

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

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
	// OfferedBy names the allowlist entry that offers the disk for preparation, "" when none
	// does (see offeredBy): such a disk is reported, never prepared.
	OfferedBy string
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

// visible says whether Config.Only lets the agent see the device of this name.
func (h *Host) visible(name string) bool {
	if len(h.cfg.Only) == 0 {
		return true
	}
	p := filepath.Join(h.cfg.DevRoot, name)
	for _, g := range h.cfg.Only {
		if ok, _ := path.Match(g, p); ok {
			return true
		}
	}
	return false
}

// offeredBy names the allowlist entry that offers a disk for preparation: "device:<glob>"
// for a glob over its path, "by-id:<glob>" for a glob over one of its /dev/disk/by-id links,
// "model:<glob>" for a glob over its model; "" when none does. Nothing offers a disk by
// default: an administrator decides which disks are the agent's, the agent only reports the
// others (a cloud volume a CSI driver attached but has not formatted yet, or a Block-mode
// PVC's raw data, looks blank to every probe).
func offeredBy(cfg Config, d Disk, byID []string) string {
	for _, g := range cfg.DeviceAllow {
		if ok, _ := path.Match(g, d.Path); ok {
			return "device:" + g
		}
	}
	for _, g := range cfg.DeviceAllowByID {
		for _, link := range byID {
			if ok, _ := path.Match(g, link); ok {
				return "by-id:" + g
			}
		}
	}
	if d.Model != "" {
		for _, g := range cfg.DeviceAllowModel {
			if ok, _ := path.Match(g, d.Model); ok {
				return "model:" + g
			}
		}
	}
	return ""
}

// byIDLinks lists the /dev/disk/by-id links (as /dev/disk/by-id/<name>, wherever ByIDRoot
// is) that resolve to the device of this kernel name.
func (h *Host) byIDLinks(name string) []string {
	if len(h.cfg.DeviceAllowByID) == 0 || h.cfg.ByIDRoot == "" {
		return nil
	}
	entries, err := os.ReadDir(h.cfg.ByIDRoot)
	if err != nil {
		return nil
	}
	var links []string
	for _, e := range entries {
		target, err := filepath.EvalSymlinks(filepath.Join(h.cfg.ByIDRoot, e.Name()))
		if err == nil && filepath.Base(target) == name {
			links = append(links, "/dev/disk/by-id/"+e.Name())
		}
	}
	return links
}

// ValidateDeviceAllow checks allowlist globs: each must be a valid pattern of a path under /dev.
func ValidateDeviceAllow(globs []string) error { return validateGlobs(globs, "/dev/") }

// ValidateDeviceAllowByID checks by-id globs: each must be a valid pattern of a path under
// /dev/disk/by-id.
func ValidateDeviceAllowByID(globs []string) error { return validateGlobs(globs, "/dev/disk/by-id/") }

// ValidateDeviceAllowModel checks model globs: valid patterns, not empty.
func ValidateDeviceAllowModel(globs []string) error {
	for _, g := range globs {
		if strings.TrimSpace(g) == "" {
			return fmt.Errorf("model glob %q is empty", g)
		}
		if _, err := path.Match(g, "x"); err != nil {
			return fmt.Errorf("model glob %q: %w", g, err)
		}
	}
	return nil
}

func validateGlobs(globs []string, under string) error {
	for _, g := range globs {
		if !strings.HasPrefix(g, under) || path.Clean(g) != g {
			return fmt.Errorf("device glob %q is not a clean path under %s", g, under)
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
	// Holders are the kernel devices stacked on the partition (device-mapper, md, bcache).
	Holders []string
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
		if _, ok := blockDev(d.Path); !ok {
			continue // no node in the agent's /dev: not a disk of this node as the agent sees it
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
	if _, err := os.Stat(filepath.Join(h.cfg.SysRoot, "block", name)); err != nil || !h.visible(name) {
		return Disk{}, fmt.Errorf("%s: %w", p, ErrNotDisk)
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
	d.OfferedBy = offeredBy(h.cfg, d, h.byIDLinks(name))
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
			Holders:   readDirNames(filepath.Join(pdir, "holders")),
		})
	}
	return d, nil
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

// readDirNames lists a directory's entries, nil when it cannot be read.
func readDirNames(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}
