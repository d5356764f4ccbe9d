package images

import (
	"archive/tar"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// buildTinyBinary compiles a static hello program, standing in for a service binary.
func buildTinyBinary(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src := "package main\n\nimport \"os\"\n\nfunc main() { os.Stdout.WriteString(\"hello from the image\\n\") }\n"
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module tiny\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "tiny")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the test binary: %v\n%s", err, out)
	}
	return bin
}

// layerFiles reads a layer's entries: name -> header, and regular files' contents.
func layerFiles(t *testing.T, l v1.Layer) (map[string]*tar.Header, map[string][]byte) {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	hdrs, data := map[string]*tar.Header{}, map[string][]byte{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		name := "/" + strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")
		hdrs[name] = h
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			data[name] = b
		}
	}
	return hdrs, data
}

// checkImage asserts what every service image must be.
// A docker-archive tarball read back synthesizes Docker media types; oci says whether to
// require OCI ones.
func checkImage(t *testing.T, img v1.Image, service string, oci ...bool) (map[string]*tar.Header, map[string][]byte) {
	t.Helper()
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/" + service}; !slices.Equal(cfg.Config.Entrypoint, want) {
		t.Errorf("entrypoint %q, want %q", cfg.Config.Entrypoint, want)
	}
	if len(cfg.Config.Cmd) != 0 {
		t.Errorf("cmd %q, want none", cfg.Config.Cmd)
	}
	if cfg.Config.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532 (numeric, so runAsNonRoot can check it)", cfg.Config.User)
	}
	if cfg.OS != "linux" || cfg.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s, want linux/%s", cfg.OS, cfg.Architecture, runtime.GOARCH)
	}
	for _, k := range []string{"title", "version", "source", "created"} {
		if cfg.Config.Labels["org.opencontainers.image."+k] == "" {
			t.Errorf("label org.opencontainers.image.%s missing: %v", k, cfg.Config.Labels)
		}
	}
	wantOCI := len(oci) == 0 || oci[0]
	mt, err := img.MediaType()
	if wantOCI && (err != nil || mt != types.OCIManifestSchema1) {
		t.Errorf("manifest media type %q (%v), want %q", mt, err, types.OCIManifestSchema1)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("%d layers, want exactly 1 on an empty base", len(layers))
	}
	if mt, _ := layers[0].MediaType(); wantOCI && mt != types.OCILayer {
		t.Errorf("layer media type %q, want %q", mt, types.OCILayer)
	}
	hdrs, data := layerFiles(t, layers[0])
	bin, ok := hdrs["/"+service]
	if !ok {
		t.Fatalf("layer has no /%s: %v", service, keys(hdrs))
	}
	if bin.Mode&0o111 == 0 || bin.Uid != 0 {
		t.Errorf("/%s mode %o uid %d, want executable and owned by root", service, bin.Mode, bin.Uid)
	}
	if !strings.Contains(string(data["/etc/passwd"]), "nonroot:x:65532:65532:") {
		t.Errorf("/etc/passwd lacks the nonroot user:\n%s", data["/etc/passwd"])
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data["/etc/passwd"])), "\n") {
		if shell := line[strings.LastIndex(line, ":")+1:]; shell != "/sbin/nologin" {
			t.Errorf("passwd entry %q has login shell %q", line, shell)
		}
	}
	for name := range hdrs {
		if base := filepath.Base(name); shells[base] {
			t.Errorf("image carries a shell: %s", name)
		}
	}
	return hdrs, data
}

func keys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func TestBuildWritesPushableImage(t *testing.T) {
	bin := buildTinyBinary(t)
	spec := Spec{Service: "tiny-operator", Binary: bin, Repository: "ghcr.io/opsuite/tiny-operator", Version: "0.1.0", Revision: "abc123"}
	img, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	hdrs, data := checkImage(t, img, "tiny-operator")
	want := []string{"/etc", "/etc/group", "/etc/passwd", "/tiny-operator"}
	if got := keys(hdrs); !slices.Equal(got, want) {
		t.Errorf("layer entries %v, want exactly %v", got, want)
	}
	orig, _ := os.ReadFile(bin)
	if string(data["/tiny-operator"]) != string(orig) {
		t.Error("binary in the layer differs from the input")
	}

	// Same inputs, same digest: images are reproducible.
	again, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := img.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Errorf("two builds of the same inputs differ: %s and %s", d1, d2)
	}

	// Written as an OCI layout and a tarball, each read back to the same image.
	out := t.TempDir()
	ref, err := spec.Reference()
	if err != nil {
		t.Fatal(err)
	}
	if ref.Name() != "ghcr.io/opsuite/tiny-operator:0.1.0" {
		t.Errorf("reference %s", ref.Name())
	}
	layoutDir, tarPath := filepath.Join(out, "tiny-operator"), filepath.Join(out, "tiny-operator.tar")
	if err := Write(img, ref, layoutDir, tarPath); err != nil {
		t.Fatal(err)
	}
	if err := Write(img, ref, layoutDir, tarPath); err != nil { // a rerun replaces, not appends
		t.Fatal(err)
	}
	lp, err := layout.FromPath(layoutDir)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 || im.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "0.1.0" {
		t.Fatalf("layout index %+v, want one manifest tagged 0.1.0", im.Manifests)
	}
	fromLayout, err := lp.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	checkImage(t, fromLayout, "tiny-operator")
	fromTar, err := tarball.ImageFromPath(tarPath, &ref)
	if err != nil {
		t.Fatalf("reading the tarball as %s: %v", ref, err)
	}
	checkImage(t, fromTar, "tiny-operator", false)
	// The tarball's manifest is Docker's (a docker-archive has none of its own), so its
	// digest differs; the config and the layer are the very same blobs.
	if got, want := mustConfigName(t, fromTar), mustConfigName(t, img); got != want {
		t.Errorf("tarball config %s, want %s", got, want)
	}
	if d, _ := fromLayout.Digest(); d != d1 {
		t.Errorf("layout image digest %s, want %s", d, d1)
	}

	// Pushable: both forms go to a registry (in-process, on loopback) and come back whole,
	// the way `crane push` sends them.
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer reg.Close()
	host := strings.TrimPrefix(reg.URL, "http://")
	for _, c := range []struct {
		from string
		img  v1.Image
	}{{"layout", fromLayout}, {"tarball", fromTar}} {
		dst, err := name.NewTag(host+"/opsuite/tiny-operator:"+c.from, name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.Write(dst, c.img); err != nil {
			t.Fatalf("pushing the %s image: %v", c.from, err)
		}
		pulled, err := remote.Image(dst)
		if err != nil {
			t.Fatalf("pulling the pushed %s image: %v", c.from, err)
		}
		want, _ := c.img.Digest()
		if got, _ := pulled.Digest(); got != want {
			t.Errorf("pushed %s image has digest %s, want %s", c.from, got, want)
		}
		checkImage(t, pulled, "tiny-operator", c.from == "layout")
	}
}

func mustConfigName(t *testing.T, img v1.Image) v1.Hash {
	t.Helper()
	h, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestBuildRefusesDynamicBinary(t *testing.T) {
	sh, err := exec.LookPath("sh") // Debian's dash is dynamically linked
	if err != nil {
		t.Fatalf("no sh to stand in for a dynamic binary: %v", err)
	}
	_, err = Build(Spec{Service: "x", Binary: sh, Repository: "ghcr.io/opsuite/x", Version: "1"})
	if err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Fatalf("Build of %s: %v, want a refusal naming CGO_ENABLED=0", sh, err)
	}
}

func TestBuildRefusesShellAsHostTool(t *testing.T) {
	bin := buildTinyBinary(t)
	_, err := Build(Spec{Service: "x", Binary: bin, Repository: "ghcr.io/opsuite/x", Version: "1", HostTools: []string{"sh"}})
	if err == nil || !strings.Contains(err.Error(), "no shell") {
		t.Fatalf("Build with host tool sh: %v, want a refusal", err)
	}
}

// The node agent's image carries blkid and friends with their libraries; the tools must run
// from the image's root alone.
func TestBuildWithHostToolsRunsInImageRoot(t *testing.T) {
	bin := buildTinyBinary(t)
	img, err := Build(Spec{Service: "node-agent", Binary: bin, Repository: "ghcr.io/opsuite/node-agent", Version: "0.1.0",
		HostTools: []string{"blkid"}, Created: time.Unix(1700000000, 0)})
	if err != nil {
		t.Fatal(err)
	}
	hdrs, data := checkImage(t, img, "node-agent")
	blkid := ""
	for name := range hdrs {
		if filepath.Base(name) == "blkid" {
			blkid = name
		}
	}
	if blkid == "" {
		t.Fatalf("no blkid in %v", keys(hdrs))
	}
	cfg, _ := img.ConfigFile()
	var ldPath string
	for _, e := range cfg.Config.Env {
		if v, ok := strings.CutPrefix(e, "LD_LIBRARY_PATH="); ok {
			ldPath = v
		}
	}
	if ldPath == "" {
		t.Fatalf("env %q lacks LD_LIBRARY_PATH", cfg.Config.Env)
	}
	if os.Geteuid() != 0 {
		t.Fatal("needs root to run the image's blkid in a chroot of the image's files; run the tests as root, as CI does")
	}
	root := t.TempDir()
	for name, h := range hdrs {
		p := filepath.Join(root, name)
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data[name], os.FileMode(h.Mode)); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(blkid, "-V")
	cmd.Env = []string{"LD_LIBRARY_PATH=" + ldPath}
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "blkid") {
		t.Fatalf("blkid -V in the image root: %v\n%s", err, out)
	}
}
