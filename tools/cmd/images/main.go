// Command images builds one OCI image per service without a container runtime: the static
// binary `make build` wrote to bin/<service> on an empty base, run as the nonroot user 65532,
// written to dist/images/<service>/ (OCI layout) and dist/images/<service>.tar (tarball),
// tagged <registry>/<service>:<version> where version defaults to the chart's appVersion, so
// that each chart's default image is the one built here.
//
//	go run ./tools/cmd/images                        # every service
//	go run ./tools/cmd/images -services node-agent   # one
//	crane push dist/images/node-agent.tar ghcr.io/opsuite/node-agent:0.1.0
//	skopeo copy oci:dist/images/node-agent:0.1.0 docker://ghcr.io/opsuite/node-agent:0.1.0
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/opsuite/suite/tools/internal/images"
	"sigs.k8s.io/yaml"
)

// services are the five images, with what the description label says.
var services = map[string]string{
	"vald-operator":     "Vald operator: ValdOperatorRelease to ValdRelease for the Vald Helm Operator",
	"veltrix-operator":  "VeltrixDB operator: VeltrixCluster with online membership changes",
	"valkey-operator":   "Valkey operator: ValkeyCluster and ValkeyNode",
	"memgraph-operator": "Memgraph operator: MemgraphCluster with replication over Bolt",
	"node-agent":        "Node agent: disks, XFS mounts, sysctls and node pools over TLS gRPC",
}

var serviceOrder = []string{"vald-operator", "veltrix-operator", "valkey-operator", "memgraph-operator", "node-agent"}

// nodeAgentTools are the commands the node agent runs (services/node-agent/internal/host
// RequiredTools); its image carries them and their libraries from the build host.
const nodeAgentTools = "blkid,wipefs,sfdisk,mkfs.xfs"

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

type options struct {
	root       string
	services   []string
	binDir     string
	outDir     string
	chartsDir  string
	registry   string
	version    string
	revision   string
	agentTools []string
	created    time.Time
}

func parseOptions(args []string, stderr io.Writer) (options, error) {
	var o options
	var svcs, tools string
	fs := flag.NewFlagSet("images", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.root, "root", "", "repository root (default: the directory holding go.work, above the working directory)")
	fs.StringVar(&svcs, "services", strings.Join(serviceOrder, ","), "comma-separated services to build")
	fs.StringVar(&o.binDir, "bin", "bin", "directory of the static binaries, relative to the root")
	fs.StringVar(&o.outDir, "out", "dist/images", "output directory, relative to the root")
	fs.StringVar(&o.chartsDir, "charts", "charts", "charts directory, relative to the root; a chart's appVersion is the default tag")
	fs.StringVar(&o.registry, "registry", "ghcr.io/opsuite", "registry and namespace of the repositories")
	fs.StringVar(&o.version, "version", "", "tag of every image (default: each chart's appVersion)")
	fs.StringVar(&o.revision, "revision", "", "VCS revision for the org.opencontainers.image.revision label")
	fs.StringVar(&tools, "node-agent-tools", nodeAgentTools, "host commands copied, with their libraries, into the node-agent image")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	var errs []error
	for _, s := range strings.Split(svcs, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if _, ok := services[s]; !ok {
			errs = append(errs, fmt.Errorf("unknown service %q (known: %s)", s, strings.Join(serviceOrder, ", ")))
		}
		o.services = append(o.services, s)
	}
	if len(o.services) == 0 {
		errs = append(errs, errors.New("-services names none"))
	}
	for _, t := range strings.Split(tools, ",") {
		if t = strings.TrimSpace(t); t != "" {
			o.agentTools = append(o.agentTools, t)
		}
	}
	// SOURCE_DATE_EPOCH makes images reproducible at a chosen time; without it the epoch.
	if v := os.Getenv("SOURCE_DATE_EPOCH"); v != "" {
		sec, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("SOURCE_DATE_EPOCH %q: %w", v, err))
		}
		o.created = time.Unix(sec, 0).UTC()
	}
	if o.root == "" {
		root, err := findRoot()
		if err != nil {
			errs = append(errs, err)
		}
		o.root = root
	}
	return o, errors.Join(errs...)
}

// findRoot walks up from the working directory to the directory holding go.work, so the
// command works from the root (make) and from tools/ (go run with GOWORK=off).
func findRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.work")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.work above %s; pass -root", dir)
		}
	}
}

func (o options) abs(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(o.root, p)
}

// chartAppVersion reads appVersion from charts/<service>/Chart.yaml.
func (o options) chartAppVersion(service string) (string, error) {
	p := filepath.Join(o.abs(o.chartsDir), service, "Chart.yaml")
	b, err := os.ReadFile(p)
	if err != nil {
		return "", fmt.Errorf("default tag of %s: %w (or pass -version)", service, err)
	}
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(b, &chart); err != nil {
		return "", fmt.Errorf("%s: %w", p, err)
	}
	if chart.AppVersion == "" {
		return "", fmt.Errorf("%s has no appVersion", p)
	}
	return chart.AppVersion, nil
}

func run(args []string, stdout, stderr io.Writer) error {
	o, err := parseOptions(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	var errs []error
	for _, svc := range o.services {
		if err := build(o, svc, stdout); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", svc, err))
		}
	}
	return errors.Join(errs...)
}

func build(o options, svc string, stdout io.Writer) error {
	version := o.version
	if version == "" {
		v, err := o.chartAppVersion(svc)
		if err != nil {
			return err
		}
		version = v
	}
	spec := images.Spec{
		Service:     svc,
		Binary:      filepath.Join(o.abs(o.binDir), svc),
		Repository:  o.registry + "/" + svc,
		Version:     version,
		Revision:    o.revision,
		Description: services[svc],
		Created:     o.created,
	}
	if svc == "node-agent" {
		spec.HostTools = o.agentTools
	}
	if _, err := os.Stat(spec.Binary); err != nil {
		return fmt.Errorf("%w; run `make build` (CGO_ENABLED=0) first", err)
	}
	ref, err := spec.Reference()
	if err != nil {
		return err
	}
	img, err := images.Build(spec)
	if err != nil {
		return err
	}
	out := o.abs(o.outDir)
	layoutDir, tarPath := filepath.Join(out, svc), filepath.Join(out, svc+".tar")
	if err := images.Write(img, ref, layoutDir, tarPath); err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	rel := func(p string) string {
		if r, err := filepath.Rel(o.root, p); err == nil {
			return r
		}
		return p
	}
	_, err = fmt.Fprintf(stdout, "%s@%s\n  layout  %s\n  tarball %s\n", ref.Name(), digest, rel(layoutDir), rel(tarPath))
	return err
}
