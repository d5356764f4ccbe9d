package podrunner

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// HelperCommand is the argument the runner passes to its helper binary (the localcluster
// command itself) to make it run ExecInNamespace.
const HelperCommand = "podexec"

// execSpec is what the helper needs to become a container's process.
type execSpec struct {
	Hostname string      `json:"hostname"`
	Mounts   []mountSpec `json:"mounts"`
	Argv     []string    `json:"argv"`
	Env      []string    `json:"env"`
	Dir      string      `json:"dir"`
	// User is who the process runs as; nil keeps root.
	User *credentials `json:"user,omitempty"`
}

type mountSpec struct {
	Source   string `json:"source"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"readOnly,omitempty"`
}

// ExecInNamespace runs in a fresh mount and UTS namespace (the runner clones the helper
// with CLONE_NEWNS|CLONE_NEWUTS): it bind-mounts the pod's volumes at their mount paths,
// sets the pod's hostname and replaces itself with the container's process. The mounts
// are private to the namespace and vanish with its last process.
func ExecInNamespace(specPath string) error {
	data, err := os.ReadFile(specPath)
	if err != nil {
		return err
	}
	var spec execSpec
	if err := json.Unmarshal(data, &spec); err != nil {
		return err
	}
	// Nothing mounted here may propagate back to the host.
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making mounts private: %w", err)
	}
	if spec.Hostname != "" {
		if err := syscall.Sethostname([]byte(spec.Hostname)); err != nil {
			return fmt.Errorf("setting hostname: %w", err)
		}
	}
	// Parents before children, so a volume mounted inside another stays visible.
	sort.SliceStable(spec.Mounts, func(i, j int) bool { return len(spec.Mounts[i].Target) < len(spec.Mounts[j].Target) })
	if spec.User != nil && spec.User.UID != 0 {
		if err := coverHostOnlyDirs(spec.Mounts, spec.Dir); err != nil {
			return err
		}
	}
	for _, m := range spec.Mounts {
		// A mount point inside another volume exists only in that volume's directory.
		if _, err := os.Stat(m.Target); os.IsNotExist(err) {
			if err := createMountpoint(m.Source, m.Target); err != nil {
				return fmt.Errorf("creating mount point %s: %w", m.Target, err)
			}
		}
		if err := syscall.Mount(m.Source, m.Target, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
			return fmt.Errorf("bind-mounting %s at %s: %w", m.Source, m.Target, err)
		}
		if m.ReadOnly {
			flags := uintptr(syscall.MS_BIND | syscall.MS_REMOUNT | syscall.MS_RDONLY | syscall.MS_REC)
			if err := syscall.Mount("", m.Target, "", flags, ""); err != nil {
				return fmt.Errorf("making %s read-only: %w", m.Target, err)
			}
		}
	}
	if err := os.Chdir(spec.Dir); err != nil {
		return fmt.Errorf("changing to working directory: %w", err)
	}
	if len(spec.Argv) == 0 {
		return fmt.Errorf("no command")
	}
	if spec.User == nil {
		return syscall.Exec(spec.Argv[0], spec.Argv, spec.Env)
	}
	return execAs(spec.User, spec.Argv, spec.Env)
}

// execAs becomes the container's user and executes argv. The binary is opened first, as
// root: the user may not be allowed to search the directories that hold it (a test
// binary's 0700 build directory), only to execute the file itself, as in an image.
//
// Credentials are per thread in Linux: the thread stays locked from the first change to the
// exec, and the group and id changes go through package syscall, which applies them to every
// thread of the process (x/sys/unix's Setgroups changes the calling thread only, so an exec
// from another thread ran with no supplementary groups).
func execAs(cr *credentials, argv, env []string) error {
	runtime.LockOSThread()
	fd, err := unix.Open(argv[0], unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening %s: %w", argv[0], err)
	}
	if cr.NoNewPrivs {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("setting no_new_privs: %w", err)
		}
	}
	groups := make([]int, 0, len(cr.Groups))
	for _, g := range cr.Groups {
		groups = append(groups, int(g))
	}
	if err := syscall.Setgroups(groups); err != nil {
		return fmt.Errorf("setting supplementary groups %v: %w", groups, err)
	}
	if err := syscall.Setresgid(int(cr.GID), int(cr.GID), int(cr.GID)); err != nil {
		return fmt.Errorf("setting gid %d: %w", cr.GID, err)
	}
	if err := syscall.Setresuid(int(cr.UID), int(cr.UID), int(cr.UID)); err != nil {
		return fmt.Errorf("setting uid %d: %w", cr.UID, err)
	}
	// A change of credentials clears the parent-death signal the runner asked for.
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		return fmt.Errorf("setting the parent-death signal: %w", err)
	}
	return execveat(fd, argv, env)
}

// execveat executes the file open at fd (AT_EMPTY_PATH), with no path lookup.
func execveat(fd int, argv, env []string) error {
	argvp, err := syscall.SlicePtrFromStrings(argv)
	if err != nil {
		return err
	}
	envp, err := syscall.SlicePtrFromStrings(env)
	if err != nil {
		return err
	}
	empty, err := syscall.BytePtrFromString("")
	if err != nil {
		return err
	}
	_, _, errno := syscall.Syscall6(unix.SYS_EXECVEAT, uintptr(fd), uintptr(unsafe.Pointer(empty)), //nolint:gosec // execveat takes C pointers
		uintptr(unsafe.Pointer(&argvp[0])), uintptr(unsafe.Pointer(&envp[0])), unix.AT_EMPTY_PATH, 0) //nolint:gosec // execveat takes C pointers
	return fmt.Errorf("executing %s: %w", argv[0], errno)
}

func createMountpoint(source, target string) error {
	st, err := os.Stat(source)
	if err != nil {
		return err
	}
	if st.IsDir() {
		return os.MkdirAll(target, 0o755)
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// coverHostOnlyDirs puts an empty tmpfs over each host directory above a mount point that
// others may not search, before the volumes are mounted. The host's directories stand in
// for the image's, and some belong to a host package a real image does not have: Debian's
// valkey-server makes /etc/valkey 2770 valkey:valkey, so a server run as another user (a
// securityContext's runAsUser) could not reach its config volume at /etc/valkey/conf, which
// on a kubelet it reaches. Only non-root processes need it (root searches anything); the
// working directory is made again inside a covered directory. A directory holding a
// volume's source stays as it is.
func coverHostOnlyDirs(mounts []mountSpec, workDir string) error {
	covered := map[string]bool{}
	for _, m := range mounts {
		dir := hostOnlyAncestor(m.Target)
		if dir == "" || covered[dir] || coveredBy(covered, dir) || holdsSource(mounts, dir) {
			continue
		}
		if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "mode=0755"); err != nil {
			return fmt.Errorf("covering host directory %s: %w", dir, err)
		}
		covered[dir] = true
	}
	if workDir != "" && coveredBy(covered, workDir) {
		if err := os.MkdirAll(workDir, 0o755); err != nil {
			return fmt.Errorf("creating working directory %s: %w", workDir, err)
		}
	}
	return nil
}

// hostOnlyAncestor is the highest existing directory strictly between / and target that
// others may not search (no o+x); "" when there is none.
func hostOnlyAncestor(target string) string {
	parts := strings.Split(strings.Trim(filepath.Clean(target), "/"), "/")
	dir := "/"
	for _, part := range parts[:len(parts)-1] {
		dir = filepath.Join(dir, part)
		st, err := os.Stat(dir)
		if err != nil || !st.IsDir() {
			return "" // missing below here: made 0755 as a mount point
		}
		if st.Mode().Perm()&0o001 == 0 {
			return dir
		}
	}
	return ""
}

// holdsSource: a volume's source lies inside dir, which a cover would hide.
func holdsSource(mounts []mountSpec, dir string) bool {
	for _, m := range mounts {
		if m.Source == dir || strings.HasPrefix(m.Source, dir+"/") {
			return true
		}
	}
	return false
}

// coveredBy: path is inside one of the covered directories.
func coveredBy(covered map[string]bool, path string) bool {
	for dir := range covered {
		if strings.HasPrefix(path, dir+"/") {
			return true
		}
	}
	return false
}
