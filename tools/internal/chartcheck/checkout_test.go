package chartcheck

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// checkout copies the files git would check out of the working tree (tracked and new files,
// without what .gitignore hides) under the given top-level directories into a temporary
// tree, symlinks as symlinks: what a fresh clone holds, including changes not yet
// committed. Anything the charts need that git would not carry (an ignored charts/*.tgz, a
// file only `helm dependency build` makes) is missing there.
func checkout(t *testing.T, root string, dirs ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"ls-files", "-z", "--cached", "--others", "--exclude-standard", "--"}, dirs...)...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	dst := t.TempDir()
	n := 0
	for name := range strings.SplitSeq(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		src := filepath.Join(root, name)
		fi, err := os.Lstat(src)
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted in the working tree, not yet in the index
		}
		if err != nil {
			t.Fatal(err)
		}
		to := filepath.Join(dst, name)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(src)
			if err != nil {
				t.Fatal(err)
			}
			err = os.Symlink(target, to)
			if err != nil {
				t.Fatal(err)
			}
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(to, b, fi.Mode().Perm()); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("%s: git would not check out a %s", name, fi.Mode().Type())
		}
		n++
	}
	if n == 0 {
		t.Fatalf("git lists no files under %v", dirs)
	}
	return dst
}

// A fresh clone installs, lints and packages every operator chart as it is, without `helm
// dependency build`: the library is vendored in each chart (charts/<chart>/charts/opsuite-lib),
// and the packaged chart carries it.
func TestOperatorChartsWorkFromAFreshCheckout(t *testing.T) {
	h := newHelm(t)
	tree := checkout(t, h.root, "charts")
	pkgDir := t.TempDir()
	for _, c := range operators {
		t.Run(c, func(t *testing.T) {
			dir := filepath.Join(tree, "charts", c)
			if _, err := h.lint(dir); err != nil {
				t.Fatal(err)
			}
			fromDir, err := h.template("rel", dir, "--namespace", "ops-system")
			if err != nil {
				t.Fatal(err)
			}
			mustFind(t, decode(t, fromDir), "Deployment", "rel-"+c)

			out, err := h.run("package", dir, "--destination", pkgDir)
			if err != nil {
				t.Fatal(err)
			}
			tgz := filepath.Join(pkgDir, c+"-"+chartVersion(t, dir)+".tgz")
			if !strings.Contains(out, tgz) {
				t.Fatalf("helm package wrote %q, want %s", out, tgz)
			}
			names := tarNames(t, tgz)
			for _, want := range []string{"charts/" + library + "/Chart.yaml", "charts/" + library + "/templates/_deployment.tpl", "files/role.yaml"} {
				if !slices.Contains(names, c+"/"+want) {
					t.Errorf("%s lacks %s; it holds %v", filepath.Base(tgz), want, names)
				}
			}
			fromPackage, err := h.template("rel", tgz, "--namespace", "ops-system")
			if err != nil {
				t.Fatal(err)
			}
			if fromPackage != fromDir {
				t.Error("the packaged chart renders differently from its directory")
			}
		})
	}
}

func chartVersion(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "version:"); ok {
			return strings.Trim(strings.TrimSpace(v), `"`)
		}
	}
	t.Fatalf("%s/Chart.yaml has no version", dir)
	return ""
}

func tarNames(t *testing.T, tgz string) []string {
	t.Helper()
	f, err := os.Open(tgz)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var names []string
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, hdr.Name)
	}
}

// charts/sync.sh --check fails when a vendored library copy drifts from charts/opsuite-lib
// (edited, or holding a file the library no longer has) or when an operator chart asks for
// another library version, and sync.sh repairs the copies.
func TestSyncCheckFailsOnLibraryDrift(t *testing.T) {
	root := repoRoot(t)
	tree := checkout(t, root, "charts", "deploy")
	sync := func(args ...string) (string, error) {
		cmd := exec.Command(filepath.Join(tree, "charts", "sync.sh"), args...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := sync("--check"); err != nil {
		t.Fatalf("sync.sh --check on a fresh checkout: %v\n%s", err, out)
	}

	vendored := filepath.Join(tree, "charts", "valkey-operator", "charts", library)
	drift := []struct {
		name  string
		apply func() error
	}{
		{"edited template", func() error {
			p := filepath.Join(vendored, "templates", "_deployment.tpl")
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(p, append(b, "{{/* local edit */}}\n"...), 0o644)
		}},
		{"stray file", func() error {
			return os.WriteFile(filepath.Join(vendored, "templates", "_stray.tpl"), []byte("{{/* */}}\n"), 0o644)
		}},
		{"copy missing", func() error { return os.RemoveAll(vendored) }},
	}
	for _, d := range drift {
		if err := d.apply(); err != nil {
			t.Fatal(err)
		}
		out, err := sync("--check")
		if err == nil || !strings.Contains(out, "charts/valkey-operator/charts/"+library+"/") {
			t.Errorf("%s: sync.sh --check = %v, want a failure naming the stale copy:\n%s", d.name, err, out)
		}
		if out, err := sync(); err != nil {
			t.Fatalf("%s: sync.sh: %v\n%s", d.name, err, out)
		}
		if out, err := sync("--check"); err != nil {
			t.Errorf("%s: sync.sh did not repair the copy: %v\n%s", d.name, err, out)
		}
	}

	chartYAML := filepath.Join(tree, "charts", "memgraph-operator", "Chart.yaml")
	b, err := os.ReadFile(chartYAML)
	if err != nil {
		t.Fatal(err)
	}
	libVersion := chartVersion(t, filepath.Join(tree, "charts", library))
	// The dependency's version line is indented under "- name: opsuite-lib".
	bumped := strings.Replace(string(b), "    version: "+libVersion+"\n", "    version: 9.9.9\n", 1)
	if bumped == string(b) {
		t.Fatalf("memgraph-operator/Chart.yaml has no dependency line \"    version: %s\"", libVersion)
	}
	if err := os.WriteFile(chartYAML, []byte(bumped), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := sync("--check"); err == nil || !strings.Contains(out, "asks for opsuite-lib 9.9.9") {
		t.Errorf("a chart asking for another library version passed sync.sh --check: %v\n%s", err, out)
	}
}

// Each operator chart declares the library itself, without a repository (Helm then takes it
// from charts/ as it is), at the library's version; the library is a library chart.
func TestOperatorChartsDeclareTheLibrary(t *testing.T) {
	root := repoRoot(t)
	type chartYAML struct {
		Type         string `json:"type"`
		Version      string `json:"version"`
		Dependencies []struct {
			Name       string `json:"name"`
			Version    string `json:"version"`
			Repository string `json:"repository"`
		} `json:"dependencies"`
	}
	read := func(chart string) chartYAML {
		b, err := os.ReadFile(filepath.Join(root, "charts", chart, "Chart.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var c chartYAML
		if err := yaml.Unmarshal(b, &c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	lib := read(library)
	if lib.Type != "library" || lib.Version == "" {
		t.Errorf("charts/%s: type %q version %q, want a versioned library chart", library, lib.Type, lib.Version)
	}
	for _, c := range operators {
		deps := read(c).Dependencies
		if len(deps) != 1 || deps[0].Name != library || deps[0].Repository != "" || deps[0].Version != lib.Version {
			t.Errorf("charts/%s/Chart.yaml dependencies %+v, want only %s %s without a repository", c, deps, library, lib.Version)
		}
	}
}
