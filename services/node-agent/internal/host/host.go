// Package host is the only package of the node agent that runs commands or touches the
// node's filesystems, devices and kernel settings. Everything above it decides; this package
// only does, so that the dangerous surface is small enough to read in one sitting.
//
// One concern per file: discovery.go (sysfs: disks, partitions, kinds, the allowlist),
// probe.go (blkid), mountinfo.go (mount tables), partition.go (sfdisk, BLKPG), mkfs.go,
// wipe.go, device.go (exclusive opens, sizes, pinning the media), mount.go and beneath.go
// (mounts resolved without symlinks), sysctl.go, capacity.go, state.go (the state file) and
// exec.go (running commands).
package host

import (
	"fmt"
	"os/exec"
	"strings"
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
	// ProcRoot is the host's /proc (the agent runs with hostPID): every process's open
	// descriptors are read there.
	ProcRoot string
	// Swaps is the kernel's list of active swap areas, normally /proc/swaps.
	Swaps string
	// KubeletRoot is the kubelet's directory, normally /var/lib/kubelet, where it maps
	// block-mode volumes (plugins/kubernetes.io/csi/volumeDevices, pods/*/volumeDevices). A
	// missing directory maps nothing.
	KubeletRoot string
	// DeviceAllow, DeviceAllowByID and DeviceAllowModel offer disks for preparation: globs
	// (path.Match) over device paths (/dev/loop7, /dev/nvme*n1), over /dev/disk/by-id links
	// (/dev/disk/by-id/nvme-Amazon_EC2_NVMe_Instance_Storage_*) and over sysfs models
	// (Amazon EC2 NVMe Instance Storage). A disk none of them offers is reported, with the
	// reason, and never prepared; all empty (the default) offers nothing.
	DeviceAllow      []string
	DeviceAllowByID  []string
	DeviceAllowModel []string
	// Only, when not empty, limits the devices the agent sees at all to these globs over
	// device paths, as if the host had no others: for in-process agents (agenttest) sharing
	// one host, each with its own loop devices as its node's disks. No flag sets it.
	Only []string
	// ByIDRoot is where the by-id links are, normally /dev/disk/by-id (udev makes them).
	ByIDRoot string
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
		ProcRoot:      "/proc",
		Swaps:         "/proc/swaps",
		KubeletRoot:   "/var/lib/kubelet",
		ByIDRoot:      "/dev/disk/by-id",
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
