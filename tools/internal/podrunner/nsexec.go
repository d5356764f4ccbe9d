package podrunner

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
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
