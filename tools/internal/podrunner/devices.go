package podrunner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// basicDevices are the character devices every container's /dev has.
var basicDevices = []string{"null", "zero", "full", "random", "urandom", "tty"}

// devLinks are /dev's usual symbolic links.
var devLinks = map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"}

// hostPath maps a hostPath volume of a pod on node to the host. Each simulated node has a
// filesystem of its own, as a real node has: /dev and below it are the node's own device
// directory (NodeDevDir: its disks only), /proc and /sys are the host kernel's (one kernel
// runs every node), and any other path lives under <NodeRootDir>/<node>, so that the agents
// of two nodes never share a state file or a PV root. Without those directories configured
// a path is the host's.
func (r *Runner) hostPath(node, path string) string {
	clean := filepath.Clean(path)
	switch {
	case under(clean, "/dev"):
		if r.cfg.NodeDevDir == "" {
			return path
		}
		if err := r.syncNodeDev(node); err != nil {
			r.log.Warn("Failed to prepare the node's /dev", "node", node, "err", err)
		}
		return filepath.Join(r.nodeDevDir(node), strings.TrimPrefix(clean, "/dev"))
	case under(clean, "/proc"), under(clean, "/sys"), r.cfg.NodeRootDir == "":
		return path
	default:
		return filepath.Join(r.cfg.NodeRootDir, node, clean)
	}
}

// under reports whether the clean absolute path p is dir or below it.
func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

func (r *Runner) nodeDevDir(node string) string { return filepath.Join(r.cfg.NodeDevDir, node) }

// wantedDevices lists the host device nodes a node's /dev holds: the basic ones and the
// node's disks with whatever partitions the kernel made of them (loop3p1).
func wantedDevices(devices []string) []string {
	want := make([]string, 0, len(basicDevices)+2*len(devices))
	for _, d := range basicDevices {
		want = append(want, "/dev/"+d)
	}
	for _, d := range devices {
		want = append(want, d)
		parts, _ := filepath.Glob(d + "p[0-9]*")
		want = append(want, parts...)
	}
	return want
}

// syncNodeDev makes node's /dev match the host's device nodes it should hold: the same
// type, major:minor, mode and owner, made with mknod; entries no longer wanted go.
func (r *Runner) syncNodeDev(node string) error {
	r.devMu.Lock()
	defer r.devMu.Unlock()
	dir := r.nodeDevDir(node)
	if err := mkdirOwned(dir, 0o755, -1, -1); err != nil {
		return err
	}
	keep := map[string]bool{}
	var errs []error
	for name, target := range devLinks {
		keep[name] = true
		p := filepath.Join(dir, name)
		if cur, err := os.Readlink(p); err == nil && cur == target {
			continue
		}
		_ = os.Remove(p)
		if err := os.Symlink(target, p); err != nil {
			errs = append(errs, err)
		}
	}
	for _, src := range wantedDevices(r.cfg.NodeDevices[node]) {
		name := filepath.Base(src)
		var st unix.Stat_t
		if err := unix.Stat(src, &st); err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("%s: %w", src, err))
			}
			continue
		}
		typ := st.Mode & unix.S_IFMT
		if typ != unix.S_IFBLK && typ != unix.S_IFCHR {
			errs = append(errs, fmt.Errorf("%s is not a device node", src))
			continue
		}
		keep[name] = true
		dst := filepath.Join(dir, name)
		var cur unix.Stat_t
		if err := unix.Lstat(dst, &cur); err == nil && cur.Mode == st.Mode && cur.Rdev == st.Rdev && cur.Uid == st.Uid && cur.Gid == st.Gid {
			continue
		}
		_ = os.Remove(dst)
		if err := unix.Mknod(dst, st.Mode, int(st.Rdev)); err != nil {
			errs = append(errs, fmt.Errorf("mknod %s: %w", dst, err))
			continue
		}
		if err := chownMode(dst, st.Mode&0o7777, int(st.Uid), int(st.Gid)); err != nil {
			errs = append(errs, err)
		}
	}
	keep[byPartUUIDTop] = true
	if err := syncPartUUIDLinks(dir, wantedDevices(r.cfg.NodeDevices[node])); err != nil {
		errs = append(errs, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, e := range entries {
		if !keep[e.Name()] {
			_ = os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
	return errors.Join(errs...)
}

// devicesLoop keeps every node's /dev current: partitions appear and vanish as the node
// agent partitions and wipes its disks.
func (r *Runner) devicesLoop(ctx context.Context) {
	if r.cfg.NodeDevDir == "" {
		return
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		nodes, _ := os.ReadDir(r.cfg.NodeDevDir)
		for _, n := range nodes {
			if n.IsDir() {
				if err := r.syncNodeDev(n.Name()); err != nil {
					r.log.Warn("Failed to update the node's /dev", "node", n.Name(), "err", err)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// byPartUUIDTop and byPartUUID are where udev links a GPT partition by its partition GUID
// (/dev/disk/by-partuuid/<guid>); a node's /dev gets the same links for its disks'
// partitions, since no udev runs here. Volumes name raw partitions that way.
const (
	byPartUUIDTop = "disk"
	byPartUUID    = "disk/by-partuuid"
)

// syncPartUUIDLinks makes dir/disk/by-partuuid hold one link per GPT partition among the
// devices (../../<partition>, as udev makes it), named by the GUID blkid reads from the
// partition table, and nothing else.
func syncPartUUIDLinks(dir string, devices []string) error {
	links := filepath.Join(dir, byPartUUID)
	if err := os.MkdirAll(links, 0o755); err != nil {
		return err
	}
	want := map[string]string{}
	for _, d := range devices {
		name := filepath.Base(d)
		if !isPartition(name) {
			continue
		}
		if uuid := partUUID(d); uuid != "" {
			want[uuid] = "../../" + name
		}
	}
	var errs []error
	for uuid, target := range want {
		p := filepath.Join(links, uuid)
		if cur, err := os.Readlink(p); err == nil && cur == target {
			continue
		}
		_ = os.Remove(p)
		if err := os.Symlink(target, p); err != nil {
			errs = append(errs, err)
		}
	}
	entries, err := os.ReadDir(links)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, e := range entries {
		if _, ok := want[e.Name()]; !ok {
			_ = os.Remove(filepath.Join(links, e.Name()))
		}
	}
	return errors.Join(errs...)
}

// isPartition says whether a device name is a partition of a loop device (loop3p2).
func isPartition(name string) bool {
	i := strings.LastIndex(name, "p")
	if i <= 0 || i == len(name)-1 || !strings.HasPrefix(name, "loop") {
		return false
	}
	for _, c := range name[i+1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// partUUID is a partition's GPT partition GUID in lowercase, as udev names it; "" when
// blkid finds none (an MBR table, or a partition being rewritten).
func partUUID(dev string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "blkid", "-p", "-o", "value", "-s", "PART_ENTRY_UUID", dev).Output()
	if err != nil {
		return ""
	}
	return strings.ToLower(strings.TrimSpace(string(out)))
}
