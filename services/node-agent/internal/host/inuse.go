package host

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// ErrInUse means something uses a device: a process holds it open, it backs a loop device,
// the kubelet maps it as a block volume, it has holders, it is active swap, or the kernel
// refuses exclusive access (mounted in some namespace, claimed by device-mapper or md).
var ErrInUse = errors.New("device is in use")

// devNums maps the device numbers of a disk and its partitions to their paths.
func devNums(d Disk) map[uint64]string {
	out := map[uint64]string{}
	add := func(majmin, p string) {
		maj, min, ok := strings.Cut(majmin, ":")
		a, err1 := strconv.ParseUint(maj, 10, 32)
		b, err2 := strconv.ParseUint(min, 10, 32)
		if ok && err1 == nil && err2 == nil {
			out[unix.Mkdev(uint32(a), uint32(b))] = p
		}
	}
	add(d.MajMin, d.Path)
	for _, p := range d.Partitions {
		add(p.MajMin, p.Path)
	}
	return out
}

// blockDev is the device number of the block device a path resolves to.
func blockDev(p string) (uint64, bool) {
	var st unix.Stat_t
	if unix.Stat(p, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFBLK {
		return 0, false
	}
	return st.Rdev, true
}

// Users lists everything, other than a mount, that uses the disk or one of its partitions:
// processes holding one open (every descriptor under the host's /proc, by device number; the
// agent's own process excepted, it pins media it writes), loop devices backed by one, kubelet
// block-volume mappings (symlinks or bind-mounted device nodes under the kubelet's
// volumeDevices trees, device nodes bind-mounted anywhere), holders in sysfs and active swap.
// An empty list means nothing was found; mounts are the caller's to judge (the agent's own
// are expected on a prepared disk), and CheckFree adds the kernel's exclusive-open test.
func (h *Host) Users(ctx context.Context, d Disk) ([]string, error) {
	devs := devNums(d)
	var uses []string
	for _, x := range d.Holders {
		uses = append(uses, fmt.Sprintf("%s is held by %s", d.Path, x))
	}
	for _, p := range d.Partitions {
		for _, x := range p.Holders {
			uses = append(uses, fmt.Sprintf("%s is held by %s", p.Path, x))
		}
	}
	uses = append(uses, h.swapUsers(devs)...)
	uses = append(uses, h.loopUsers(devs)...)
	uses = append(uses, h.blockVolumeUsers(devs)...)
	procs, err := h.processUsers(ctx, devs)
	if err != nil {
		return nil, err
	}
	return append(uses, procs...), nil
}

// matchPath resolves a path some kernel table names (a loop device's backing file, a swap
// area) to one of devs: by the device number of what it names in the agent's namespace, else
// by its kernel name under /dev (the table may show the path as another namespace sees it).
func matchPath(p string, devs map[uint64]string) (string, bool) {
	if rdev, ok := blockDev(p); ok {
		dev, found := devs[rdev]
		return dev, found
	}
	if strings.HasPrefix(p, "/dev/") {
		for _, dev := range devs {
			if filepath.Base(dev) == filepath.Base(p) {
				return dev, true
			}
		}
	}
	return "", false
}

func (h *Host) swapUsers(devs map[uint64]string) []string {
	b, err := os.ReadFile(h.cfg.Swaps)
	if err != nil {
		return nil
	}
	var uses []string
	for i, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if i == 0 || len(f) == 0 {
			continue // the header
		}
		if dev, ok := matchPath(unescape(f[0]), devs); ok {
			uses = append(uses, fmt.Sprintf("%s is active swap", dev))
		}
	}
	return uses
}

func (h *Host) loopUsers(devs map[uint64]string) []string {
	entries, err := os.ReadDir(filepath.Join(h.cfg.SysRoot, "block"))
	if err != nil {
		return nil
	}
	var uses []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "loop") {
			continue
		}
		backing := readTrim(filepath.Join(h.cfg.SysRoot, "block", e.Name(), "loop", "backing_file"))
		if backing == "" {
			continue
		}
		if dev, ok := matchPath(strings.TrimSuffix(backing, " (deleted)"), devs); ok {
			uses = append(uses, fmt.Sprintf("%s backs loop device %s", dev, filepath.Join(h.cfg.DevRoot, e.Name())))
		}
	}
	return uses
}

// blockVolumeUsers finds the kubelet's mappings of block-mode volumes: under
// plugins/kubernetes.io/csi/volumeDevices (the CSI staging and global map paths) and
// pods/*/volumeDevices (each pod's), symlinks to the device or device nodes bind-mounted
// there; and device nodes bind-mounted anywhere in the agent's or the host's mount table.
func (h *Host) blockVolumeUsers(devs map[uint64]string) []string {
	var uses []string
	if h.cfg.KubeletRoot != "" {
		trees := []string{filepath.Join(h.cfg.KubeletRoot, "plugins", "kubernetes.io", "csi", "volumeDevices")}
		pods, _ := filepath.Glob(filepath.Join(h.cfg.KubeletRoot, "pods", "*", "volumeDevices"))
		for _, tree := range append(trees, pods...) {
			// An unreadable or vanished entry maps nothing: walk errors are skipped.
			_ = filepath.WalkDir(tree, func(p string, de fs.DirEntry, err error) error {
				if err == nil && !de.IsDir() {
					if rdev, ok := blockDev(p); ok {
						if dev, found := devs[rdev]; found {
							uses = append(uses, fmt.Sprintf("%s is mapped as a block volume at %s", dev, p))
						}
					}
				}
				return nil
			})
		}
	}
	// A bind-mounted device node shows as a mount of the filesystem holding /dev (devtmpfs,
	// or tmpfs in a container) with the node as its root; stat it where it is mounted, in the
	// host's namespace through the first process's root.
	tables := []struct{ table, prefix string }{
		{h.cfg.MountInfo, ""},
		{h.cfg.BootMountInfo, filepath.Join(filepath.Dir(h.cfg.BootMountInfo), "root")},
	}
	for _, t := range tables {
		mounts, err := ReadMountInfo(t.table)
		if err != nil {
			continue
		}
		for _, m := range mounts {
			if m.Root == "/" || (m.FSType != "devtmpfs" && m.FSType != "tmpfs") {
				continue
			}
			if rdev, ok := blockDev(t.prefix + m.MountPoint); ok {
				if dev, found := devs[rdev]; found {
					uses = append(uses, fmt.Sprintf("%s is bind-mounted at %s (a block volume mapping)", dev, m.MountPoint))
				}
			}
		}
	}
	return uses
}

// processUsers scans every process's open descriptors for the devices, by device number,
// so a device opened under any name (a /dev/disk/by-id link, a node of a container's own)
// is found.
func (h *Host) processUsers(ctx context.Context, devs map[uint64]string) ([]string, error) {
	entries, err := os.ReadDir(h.cfg.ProcRoot)
	if err != nil {
		return nil, fmt.Errorf("listing processes: %w", err)
	}
	// The agent's own pid as ProcRoot's pid namespace numbers it (the host's /proc is
	// mounted in the pod without hostPID).
	self := os.Getpid()
	if link, err := os.Readlink(filepath.Join(h.cfg.ProcRoot, "self")); err == nil {
		if n, err := strconv.Atoi(link); err == nil {
			self = n
		}
	}
	var uses []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		fdDir := filepath.Join(h.cfg.ProcRoot, e.Name(), "fd")
		fds, err := os.ReadDir(fdDir)
		if err != nil {
			continue // exited meanwhile
		}
		seen := map[string]bool{}
		for _, fd := range fds {
			rdev, ok := blockDev(filepath.Join(fdDir, fd.Name()))
			if !ok {
				continue
			}
			if dev, found := devs[rdev]; found && !seen[dev] {
				seen[dev] = true
				comm := readTrim(filepath.Join(h.cfg.ProcRoot, e.Name(), "comm"))
				uses = append(uses, fmt.Sprintf("%s is open by process %d (%s)", dev, pid, comm))
			}
		}
		// A device memory-mapped and its descriptor closed shows only in the maps.
		for _, dev := range mappedDevices(filepath.Join(h.cfg.ProcRoot, e.Name(), "maps"), devs) {
			if !seen[dev] {
				seen[dev] = true
				comm := readTrim(filepath.Join(h.cfg.ProcRoot, e.Name(), "comm"))
				uses = append(uses, fmt.Sprintf("%s is memory-mapped by process %d (%s)", dev, pid, comm))
			}
		}
	}
	sort.Strings(uses)
	return uses, nil
}

// CheckFree returns an ErrInUse error naming every user of the disk and of each partition it
// has now (re-read from sysfs: a partitioning step changes them): Users, and the kernel's
// refusal of an exclusive open (mounts of any namespace, device-mapper, md, swap).
func (h *Host) CheckFree(ctx context.Context, d Disk) error {
	cur, err := h.disk(d.Name)
	if err != nil {
		return err
	}
	uses, err := h.Users(ctx, cur)
	if err != nil {
		return err
	}
	for _, dev := range append([]string{cur.Path}, partitionPaths(cur)...) {
		if err := h.CheckExclusive(dev); errors.Is(err, ErrBusy) {
			uses = append(uses, fmt.Sprintf("%s is claimed exclusively (mounted, or held by device-mapper, md or swap)", dev))
		}
	}
	if len(uses) > 0 {
		return fmt.Errorf("%s: %w: %s", d.Path, ErrInUse, strings.Join(uses, "; "))
	}
	return nil
}

// settle is CheckFree that lets a transient user go: udev probes a device briefly after a
// writer closes it. A user still there after about a second is real.
func (h *Host) settle(ctx context.Context, d Disk) error {
	for i := 0; ; i++ {
		err := h.CheckFree(ctx, d)
		if err == nil || !errors.Is(err, ErrInUse) || i == 10 {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func partitionPaths(d Disk) []string {
	out := make([]string, 0, len(d.Partitions))
	for _, p := range d.Partitions {
		out = append(out, p.Path)
	}
	return out
}

// withFreeMedia runs a destructive step (partitioning, mkfs, wipe) on a disk that is free.
//
// No window between check and write: the step runs under the caller's device lock and
// withMedia's descriptor, which pins the media (the name cannot be re-attached to other media
// meanwhile). The disk and its partitions are checked free (CheckFree) immediately before
// the step. The agent does not hold an O_EXCL descriptor through the step: the kernel allows
// one exclusive opener, and the tools (mkfs.xfs, wipefs) open the device O_EXCL themselves,
// which is what refuses a mount or a device-mapper claim made after the check; and no open
// mode keeps out a plain open(2) by another process in the microseconds between check and
// tool. So the check is repeated after the step: a user that appeared meanwhile fails the
// call, which then never reports the device prepared or wiped.
func (h *Host) withFreeMedia(ctx context.Context, d Disk, write func() error) error {
	return h.withMedia(d, func() error {
		if err := h.settle(ctx, d); err != nil {
			return err
		}
		if err := write(); err != nil {
			return err
		}
		if err := h.settle(ctx, d); err != nil {
			return fmt.Errorf("after writing: %w", err)
		}
		return nil
	})
}

// mappedDevices lists the devices among devs that a process's maps show mapped: lines whose
// path is under /dev, resolved as matchPath does.
func mappedDevices(maps string, devs map[uint64]string) []string {
	b, err := os.ReadFile(maps)
	if err != nil || !strings.Contains(string(b), " /dev/") {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		i := strings.Index(line, " /dev/")
		if i < 0 {
			continue
		}
		if dev, ok := matchPath(strings.TrimSuffix(line[i+1:], " (deleted)"), devs); ok {
			out = append(out, dev)
		}
	}
	return out
}
