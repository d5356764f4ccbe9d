package restore

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/opsuite/suite/shared/objectstore"
)

// MarkerName is the file a restore leaves in the data directory: the restore's identity,
// followed by " loading" until the data is complete.
const MarkerName = ".valkey-restore"

const loadingSuffix = " loading"

// Target is where the server reads its data at start, as its config file says.
type Target struct {
	Dir string
	// DBFilename is the RDB (dbfilename, default dump.rdb).
	DBFilename string
	// AppendOnly: the server loads the AOF instead (appendonly yes); the RDB then becomes
	// the AOF's base file, in AppendDirName, named after AppendFilename.
	AppendOnly     bool
	AppendDirName  string
	AppendFilename string
}

// TargetFromConfig reads dbfilename, appendonly, appenddirname and appendfilename from a
// valkey.conf (the last occurrence wins, as in the server); dir is the data directory the
// init container mounts where the server mounts its own.
func TargetFromConfig(dir, config string) (Target, error) {
	t := Target{Dir: dir, DBFilename: "dump.rdb", AppendDirName: "appendonlydir", AppendFilename: "appendonly.aof"}
	f, err := os.Open(config)
	if err != nil {
		return t, err
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		key, value, ok := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		if !ok || strings.HasPrefix(key, "#") {
			continue
		}
		value = strings.Trim(strings.TrimSpace(value), `"'`)
		switch strings.ToLower(key) {
		case "dbfilename":
			t.DBFilename = value
		case "appendonly":
			t.AppendOnly = strings.EqualFold(value, "yes")
		case "appenddirname":
			t.AppendDirName = value
		case "appendfilename":
			t.AppendFilename = value
		}
	}
	if err := sc.Err(); err != nil {
		return t, err
	}
	for _, name := range []string{t.DBFilename, t.AppendDirName, t.AppendFilename} {
		if name == "" || filepath.Base(name) != name || name == "." || name == ".." {
			return t, fmt.Errorf("the server config names data file %q outside the data directory", name)
		}
	}
	return t, nil
}

// Outcome is what Load did.
type Outcome string

// Load's outcomes.
const (
	// Restored: the RDB was downloaded, checked and put in place.
	Restored Outcome = "restored"
	// AlreadyRestored: this restore filled the directory before (the pod started again).
	AlreadyRestored Outcome = "already restored"
)

// ErrNotEmpty: the data directory holds data this restore did not write; it is never
// written over.
var ErrNotEmpty = errors.New("the data directory already holds data (kept from an earlier server): a restore never writes over it")

// Load downloads src's object into t's directory, checking its size and SHA-256 on the
// way, and only then puts it where the server loads it: as the RDB and, with appendonly,
// as the base of a new AOF (a hard link, so no second copy). A directory this restore
// already filled is left as it is; one holding anything else is refused with ErrNotEmpty.
// A mismatch is a *CorruptError and leaves nothing behind.
func Load(ctx context.Context, store *objectstore.Store, src Source, t Target) (Outcome, error) {
	marker := filepath.Join(t.Dir, MarkerName)
	if b, err := os.ReadFile(marker); err == nil {
		switch strings.TrimSpace(string(b)) {
		case src.Restore:
			return AlreadyRestored, nil
		case src.Restore + loadingSuffix:
			// An earlier attempt stopped half-way: remove what it wrote, start again.
			for _, name := range []string{t.DBFilename, t.AppendDirName, tmpName(t)} {
				if err := os.RemoveAll(filepath.Join(t.Dir, name)); err != nil {
					return "", err
				}
			}
		default:
			return "", ErrNotEmpty
		}
	} else {
		entries, err := os.ReadDir(t.Dir)
		if err != nil {
			return "", err
		}
		for _, e := range entries {
			if e.Name() != "lost+found" {
				return "", ErrNotEmpty
			}
		}
	}
	if err := writeFile(marker, []byte(src.Restore+loadingSuffix)); err != nil {
		return "", err
	}
	tmp := filepath.Join(t.Dir, tmpName(t))
	if err := download(ctx, store, src, tmp); err != nil {
		_ = os.Remove(tmp)
		return "", err
	}
	rdb := filepath.Join(t.Dir, t.DBFilename)
	if err := os.Rename(tmp, rdb); err != nil {
		return "", err
	}
	if t.AppendOnly {
		if err := aofBase(t, rdb); err != nil {
			return "", err
		}
	}
	if err := syncDir(t.Dir); err != nil {
		return "", err
	}
	if err := writeFile(marker, []byte(src.Restore)); err != nil {
		return "", err
	}
	return Restored, nil
}

func tmpName(t Target) string { return ".restore-" + t.DBFilename + ".tmp" }

func download(ctx context.Context, store *objectstore.Store, src Source, to string) error {
	r, err := store.Get(ctx, src.Object)
	if err != nil {
		if objectstore.IsNotFound(err) {
			return &CorruptError{Why: "missing"}
		}
		return err
	}
	defer func() { _ = r.Close() }()
	f, err := os.OpenFile(to, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	err = check(r, src.Size, src.SHA256, f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// aofBase makes rdb the base file of a new multi-part AOF (Valkey 7+/Redis 7+): the
// server with appendonly yes loads the AOF and ignores the RDB, and with no AOF at all
// it would start empty.
func aofBase(t Target, rdb string) error {
	dir := filepath.Join(t.Dir, t.AppendDirName)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	base := t.AppendFilename + ".1.base.rdb"
	if err := os.Link(rdb, filepath.Join(dir, base)); err != nil {
		return fmt.Errorf("linking the RDB as the AOF's base: %w", err)
	}
	manifest := fmt.Sprintf("file %s seq 1 type b\n", base)
	if err := writeFile(filepath.Join(dir, t.AppendFilename+".manifest"), []byte(manifest)); err != nil {
		return err
	}
	return syncDir(dir)
}

// writeFile replaces name atomically.
func writeFile(name string, b []byte) error {
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, name)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
