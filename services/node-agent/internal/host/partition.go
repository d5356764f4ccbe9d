package host

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// PartitionPath names partition n of a disk the way the kernel does.
func PartitionPath(diskPath string, n int) string {
	last := diskPath[len(diskPath)-1]
	if last >= '0' && last <= '9' {
		return fmt.Sprintf("%sp%d", diskPath, n)
	}
	return fmt.Sprintf("%s%d", diskPath, n)
}

// PartitionSplit writes a fresh GPT with an XFS partition of xfsPercent of the device and a
// raw partition with the rest, under the given disk GUID so the agent can later recognise
// its own table; the disk is checked free of users right before and after (withFreeMedia).
// It returns the two partition paths once their device nodes exist.
func (h *Host) PartitionSplit(ctx context.Context, d Disk, xfsPercent uint32, diskGUID string) (p1, p2 string, err error) {
	err = h.withFreeMedia(ctx, d, func() error {
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
