package host

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// ErrUnsafePath means a path could not be resolved beneath its root without following a
// symlink or leaving the root: someone may be trying to redirect a mount.
var ErrUnsafePath = errors.New("path is not a plain directory beneath its root")

// openBeneath opens target, which must be root or lie under it, as an O_PATH directory, each
// component resolved beneath root without following symlinks (openat2 with RESOLVE_BENEATH |
// RESOLVE_NO_SYMLINKS, or O_NOFOLLOW one component at a time where the kernel lacks openat2).
// With create, missing directories are made with mkdirat on the directory already resolved, so
// no name is looked up twice. The caller closes the descriptor.
func openBeneath(root, target string, create bool) (int, error) {
	var comps []string
	if target != root {
		rel, ok := strings.CutPrefix(target, strings.TrimSuffix(root, "/")+"/")
		if !ok {
			return -1, fmt.Errorf("%s is not under %s: %w", target, root, ErrUnsafePath)
		}
		comps = strings.Split(rel, "/")
	}
	if create {
		// The root is the operator's configuration, not something a caller can name.
		if err := os.MkdirAll(root, 0o750); err != nil {
			return -1, err
		}
	}
	fd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: root, Err: err}
	}
	for i, c := range comps {
		if c == "" || c == "." || c == ".." {
			unix.Close(fd)
			return -1, fmt.Errorf("%s: %w", target, ErrUnsafePath)
		}
		next, err := openComponent(fd, c)
		if errors.Is(err, unix.ENOENT) && create {
			if err = unix.Mkdirat(fd, c, 0o750); err == nil || errors.Is(err, unix.EEXIST) {
				next, err = openComponent(fd, c)
			}
		}
		unix.Close(fd)
		switch {
		case errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.EXDEV):
			return -1, fmt.Errorf("%s is a symlink or not a directory: %w", filepath.Join(append([]string{root}, comps[:i+1]...)...), ErrUnsafePath)
		case err != nil:
			return -1, &os.PathError{Op: "open", Path: filepath.Join(append([]string{root}, comps[:i+1]...)...), Err: err}
		}
		fd = next
	}
	return fd, nil
}

// openat2Missing is set once the kernel has answered ENOSYS (before Linux 5.6).
var openat2Missing atomic.Bool

func openComponent(dirfd int, name string) (int, error) {
	const flags = unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	if !openat2Missing.Load() {
		fd, err := unix.Openat2(dirfd, name, &unix.OpenHow{
			Flags: flags, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS,
		})
		if !errors.Is(err, unix.ENOSYS) {
			return fd, err
		}
		openat2Missing.Store(true)
	}
	// One component, never "..": O_NOFOLLOW refuses a symlink (ENOTDIR with O_DIRECTORY).
	return unix.Openat(dirfd, name, flags, 0)
}

// fdPath names an open descriptor so that a path-taking system call (mount) acts on exactly
// the directory that was resolved, whatever is renamed or swapped for a symlink meanwhile.
func fdPath(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// CheckBeneath refuses a target that cannot be resolved beneath root without symlinks; a
// target that does not exist yet is fine (it will be created beneath root).
func (h *Host) CheckBeneath(root, target string) error {
	fd, err := openBeneath(root, target, false)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	return unix.Close(fd)
}

// mountBeneath mounts onto target, resolved (and created) beneath root without symlinks.
func mountBeneath(root, target string, mount func(at string) error) error {
	fd, err := openBeneath(root, target, true)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return mount(fdPath(fd))
}

// Unmount unmounts target, resolved beneath root without symlinks; the last component is not
// followed either (UMOUNT_NOFOLLOW). A target that is not mounted or does not exist is not
// an error.
func (h *Host) Unmount(root, target string) error {
	if target == root {
		return fmt.Errorf("refusing to unmount the root %s itself: %w", root, ErrUnsafePath)
	}
	parent, err := openBeneath(root, filepath.Dir(target), false)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(parent)
	err = unix.Unmount(fdPath(parent)+"/"+filepath.Base(target), unix.UMOUNT_NOFOLLOW)
	if err == nil || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
		return nil
	}
	return fmt.Errorf("unmounting %s: %w", target, err)
}
