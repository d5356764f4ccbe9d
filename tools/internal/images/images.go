// Package images builds the suite's container images without a container runtime: an empty
// base and one layer holding the service's static binary and an /etc/passwd naming the
// nonroot user, written as an OCI image layout and as a tarball that `crane push` and
// `skopeo copy` accept.
package images

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// NonrootUID is the user (and group) every image runs as; the charts' securityContext
// runAsUser matches it.
const NonrootUID = 65532

// User is the image config's user, numeric so that runAsNonRoot can verify it.
var User = fmt.Sprintf("%d:%d", NonrootUID, NonrootUID)

// Source is the org.opencontainers.image.source label.
const Source = "https://github.com/opsuite/suite"

// defaultPath is the PATH of every image; it only matters to images that carry host tools.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Spec describes one service's image.
type Spec struct {
	// Service names the image, its entrypoint /<Service> and the default repository.
	Service string
	// Binary is the host path of the service's static binary (CGO_ENABLED=0).
	Binary string
	// Repository is the image's repository, e.g. ghcr.io/opsuite/vald-operator.
	Repository string
	// Version is the tag; the chart's appVersion, so the chart's default image matches.
	Version string
	// Revision is the VCS revision recorded in the labels; empty leaves it out.
	Revision string
	// Description is the org.opencontainers.image.description label.
	Description string
	// Created is the image's and the files' time; the zero value means the Unix epoch, so
	// that the same inputs give the same digest (set it from SOURCE_DATE_EPOCH).
	Created time.Time
	// HostTools are commands (names looked up in PATH, or absolute paths) copied from the
	// build host with every shared library they load, for a service that runs external tools
	// (the node agent runs blkid, wipefs, sfdisk and mkfs.xfs). Never a shell.
	HostTools []string
}

// Reference is the image's tag reference, repository:version.
func (s Spec) Reference() (name.Tag, error) {
	return name.NewTag(s.Repository+":"+s.Version, name.StrictValidation)
}

func (s Spec) validate() error {
	var errs []error
	if s.Service == "" || strings.ContainsAny(s.Service, "/ ") {
		errs = append(errs, fmt.Errorf("service %q must be a plain name", s.Service))
	}
	if s.Binary == "" {
		errs = append(errs, errors.New("binary path is required"))
	}
	if s.Version == "" {
		errs = append(errs, errors.New("version is required"))
	}
	if _, err := s.Reference(); err != nil {
		errs = append(errs, fmt.Errorf("reference: %w", err))
	}
	return errors.Join(errs...)
}

// file is one regular file of the layer.
type file struct {
	name string // absolute path inside the image
	mode int64
	data []byte
}

// Build returns the service's image. The binary must be a static ELF executable: a
// dynamically linked one would find no C library in the image.
func Build(s Spec) (v1.Image, error) {
	if err := s.validate(); err != nil {
		return nil, fmt.Errorf("image of %s: %w", s.Service, err)
	}
	arch, err := staticELF(s.Binary)
	if err != nil {
		return nil, err
	}
	bin, err := os.ReadFile(s.Binary)
	if err != nil {
		return nil, fmt.Errorf("reading binary: %w", err)
	}
	files := []file{
		{name: "/" + s.Service, mode: 0o755, data: bin},
		// No login shell anywhere: the image has none.
		{name: "/etc/passwd", mode: 0o644, data: []byte(fmt.Sprintf(
			"root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", NonrootUID, NonrootUID))},
		{name: "/etc/group", mode: 0o644, data: []byte(fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", NonrootUID))},
	}
	env := []string{"PATH=" + defaultPath}
	if len(s.HostTools) > 0 {
		tools, libDirs, err := hostTools(s.HostTools)
		if err != nil {
			return nil, err
		}
		files = append(files, tools...)
		// Debian's loader finds multiarch libraries through /etc/ld.so.cache, which the image
		// lacks; name their directories instead.
		env = append(env, "LD_LIBRARY_PATH="+strings.Join(libDirs, ":"))
	}

	created := s.Created
	if created.IsZero() {
		created = time.Unix(0, 0)
	}
	created = created.UTC()
	layerTar, err := tarFiles(files, created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("making layer: %w", err)
	}

	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History: v1.History{
			Created:   v1.Time{Time: created},
			CreatedBy: "opsuite tools/cmd/images: /" + s.Service + ", /etc/passwd" + hostToolsNote(s.HostTools),
			Comment:   "static binary on an empty base; no shell",
		},
	})
	if err != nil {
		return nil, fmt.Errorf("appending layer: %w", err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture = arch
	cfg.OS = "linux"
	cfg.Created = v1.Time{Time: created}
	cfg.Config = v1.Config{
		Entrypoint: []string{"/" + s.Service},
		User:       User,
		Env:        env,
		WorkingDir: "/",
		Labels:     s.labels(created),
	}
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, fmt.Errorf("setting config: %w", err)
	}
	return img, nil
}

func hostToolsNote(tools []string) string {
	if len(tools) == 0 {
		return ""
	}
	return ", host tools " + strings.Join(tools, " ")
}

func (s Spec) labels(created time.Time) map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":   s.Service,
		"org.opencontainers.image.version": s.Version,
		"org.opencontainers.image.source":  Source,
		"org.opencontainers.image.url":     Source,
		"org.opencontainers.image.vendor":  "opsuite",
		"org.opencontainers.image.created": created.Format(time.RFC3339),
	}
	if s.Revision != "" {
		l["org.opencontainers.image.revision"] = s.Revision
	}
	if s.Description != "" {
		l["org.opencontainers.image.description"] = s.Description
	}
	return l
}

// tarFiles writes files, and every parent directory, sorted, owned by root, at time t.
func tarFiles(files []file, t time.Time) ([]byte, error) {
	dirs := map[string]bool{}
	for _, f := range files {
		for d := path.Dir(f.name); d != "/"; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	type entry struct {
		hdr  *tar.Header
		data []byte
	}
	var entries []entry
	for d := range dirs {
		entries = append(entries, entry{hdr: &tar.Header{
			Typeflag: tar.TypeDir, Name: strings.TrimPrefix(d, "/") + "/", Mode: 0o755, ModTime: t,
		}})
	}
	seen := map[string]bool{}
	for _, f := range files {
		if seen[f.name] || dirs[f.name] {
			return nil, fmt.Errorf("layer: %s added twice", f.name)
		}
		seen[f.name] = true
		entries = append(entries, entry{hdr: &tar.Header{
			Typeflag: tar.TypeReg, Name: strings.TrimPrefix(f.name, "/"), Mode: f.mode,
			Size: int64(len(f.data)), ModTime: t,
		}, data: f.data})
	}
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.hdr.Name, b.hdr.Name) })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		e.hdr.Uname, e.hdr.Gname = "root", "root"
		e.hdr.Format = tar.FormatPAX
		if err := tw.WriteHeader(e.hdr); err != nil {
			return nil, fmt.Errorf("layer: %w", err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, fmt.Errorf("layer: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	return buf.Bytes(), nil
}

// goArch maps ELF machines to GOARCH names, which OCI platforms use.
var goArch = map[elf.Machine]string{
	elf.EM_X86_64:  "amd64",
	elf.EM_AARCH64: "arm64",
	elf.EM_PPC64:   "ppc64le",
	elf.EM_S390:    "s390x",
	elf.EM_RISCV:   "riscv64",
	elf.EM_386:     "386",
	elf.EM_ARM:     "arm",
}

// staticELF checks that p is a statically linked ELF executable and returns its GOARCH.
func staticELF(p string) (string, error) {
	f, err := elf.Open(p)
	if err != nil {
		return "", fmt.Errorf("%s is not an ELF executable: %w", p, err)
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return "", fmt.Errorf("%s is dynamically linked; build it with CGO_ENABLED=0", p)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		return "", fmt.Errorf("%s needs shared libraries %v; build it with CGO_ENABLED=0", p, libs)
	}
	arch, ok := goArch[f.Machine]
	if !ok {
		return "", fmt.Errorf("%s: unsupported machine %s", p, f.Machine)
	}
	return arch, nil
}

// shells are refused as host tools: the images carry no shell.
var shells = map[string]bool{"sh": true, "bash": true, "dash": true, "ash": true, "zsh": true, "busybox": true}

// hostTools returns the files of the named commands and of every shared library they load
// (their ELF interpreter and DT_NEEDED closure), at the paths the loader looks for them, and
// the directories holding those libraries.
func hostTools(names []string) ([]file, []string, error) {
	var files []file
	added := map[string]bool{}
	libDirs := map[string]bool{}
	add := func(dst, src string) error {
		if added[dst] {
			return nil
		}
		data, err := os.ReadFile(src) // follows symlinks: the soname link becomes the file
		if err != nil {
			return fmt.Errorf("host tool: %w", err)
		}
		added[dst] = true
		files = append(files, file{name: dst, mode: 0o755, data: data})
		return nil
	}
	var queue []string
	for _, n := range names {
		if shells[filepath.Base(n)] {
			return nil, nil, fmt.Errorf("host tool %s: the images carry no shell", n)
		}
		p := n
		if !filepath.IsAbs(p) {
			var err error
			if p, err = lookPath(n); err != nil {
				return nil, nil, err
			}
		}
		if err := add(p, p); err != nil {
			return nil, nil, err
		}
		queue = append(queue, p)
	}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		interp, needed, machine, err := elfDeps(p)
		if err != nil {
			return nil, nil, err
		}
		if interp != "" && !added[interp] {
			if err := add(interp, interp); err != nil {
				return nil, nil, err
			}
		}
		for _, lib := range needed {
			found, err := findLibrary(lib, machine)
			if err != nil {
				return nil, nil, fmt.Errorf("%s needs %s: %w", p, lib, err)
			}
			libDirs[path.Dir(found)] = true
			if !added[found] {
				if err := add(found, found); err != nil {
					return nil, nil, err
				}
				queue = append(queue, found)
			}
		}
	}
	dirs := make([]string, 0, len(libDirs))
	for d := range libDirs {
		dirs = append(dirs, d)
	}
	slices.Sort(dirs)
	return files, dirs, nil
}

func lookPath(n string) (string, error) {
	for _, dir := range filepath.SplitList(defaultPath) {
		p := filepath.Join(dir, n)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("host tool %s not found in %s; install its package on the build host", n, defaultPath)
}

func elfDeps(p string) (interp string, needed []string, machine elf.Machine, err error) {
	f, err := elf.Open(p)
	if err != nil {
		return "", nil, 0, fmt.Errorf("%s: %w", p, err)
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			b, err := io.ReadAll(prog.Open())
			if err != nil {
				return "", nil, 0, fmt.Errorf("%s: reading interpreter: %w", p, err)
			}
			interp = strings.TrimRight(string(b), "\x00")
		}
	}
	needed, err = f.ImportedLibraries()
	if err != nil {
		return "", nil, 0, fmt.Errorf("%s: %w", p, err)
	}
	return interp, needed, f.Machine, nil
}

// multiarch names Debian's library directories per machine.
var multiarch = map[elf.Machine]string{
	elf.EM_X86_64:  "x86_64-linux-gnu",
	elf.EM_AARCH64: "aarch64-linux-gnu",
	elf.EM_PPC64:   "powerpc64le-linux-gnu",
	elf.EM_S390:    "s390x-linux-gnu",
	elf.EM_RISCV:   "riscv64-linux-gnu",
}

func findLibrary(lib string, m elf.Machine) (string, error) {
	var dirs []string
	if t, ok := multiarch[m]; ok {
		dirs = append(dirs, "/lib/"+t, "/usr/lib/"+t)
	}
	dirs = append(dirs, "/lib64", "/usr/lib64", "/lib", "/usr/lib")
	for _, d := range dirs {
		p := path.Join(d, lib)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("not found in %s", strings.Join(dirs, " "))
}

// Write stores img as an OCI image layout in layoutDir (replacing it) and as a tarball at
// tarPath, both tagged ref. Push with `crane push <tarPath> <ref>`, or
// `skopeo copy oci:<layoutDir>:<tag> docker://<ref>`.
func Write(img v1.Image, ref name.Tag, layoutDir, tarPath string) error {
	if err := os.RemoveAll(layoutDir); err != nil {
		return fmt.Errorf("clearing %s: %w", layoutDir, err)
	}
	p, err := layout.Write(layoutDir, empty.Index)
	if err != nil {
		return fmt.Errorf("writing OCI layout: %w", err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": ref.TagStr(),
		"io.containerd.image.name":          ref.Name(),
	})); err != nil {
		return fmt.Errorf("writing OCI layout: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(tarPath), 0o755); err != nil {
		return err
	}
	tmp := tarPath + ".tmp." + strconv.Itoa(os.Getpid())
	if err := tarball.WriteToFile(tmp, ref, img); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("writing tarball: %w", err)
	}
	if err := os.Rename(tmp, tarPath); err != nil {
		return fmt.Errorf("writing tarball: %w", err)
	}
	return nil
}
