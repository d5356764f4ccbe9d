// Command demo shows the suite on the local cluster: it installs every chart with Helm,
// applies deploy/samples and prints them until interrupted. `make demo` starts the cluster
// first (`make up`); Ctrl-C stops it again unless --keep-cluster is given, and exits 0: a
// requested stop is no failure (`make demo` runs the built binary, not `go run`, whose
// own exit status would be 1 after an interrupt).
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/opsuite/suite/tools/internal/localcluster"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// charts are installed in this order, each into its own namespace.
var charts = []string{"node-agent", "vald-operator", "veltrix-operator", "valkey-operator", "memgraph-operator"}

type demo struct {
	root, kubeconfig string
	helmEnv          []string
}

func run() error {
	repo := flag.String("repo", ".", "repository root")
	watch := flag.Duration("for", 0, "stop after watching this long instead of waiting for Ctrl-C (0 waits)")
	keep := flag.Bool("keep-cluster", false, "leave the local cluster running on exit (stop it with `make down`)")
	flag.Parse()
	root, err := filepath.Abs(*repo)
	if err != nil {
		return err
	}
	d := demo{root: root, kubeconfig: filepath.Join(root, ".local", "kubeconfig")}
	if _, err := os.Stat(d.kubeconfig); err != nil {
		return fmt.Errorf("no local cluster (%s is missing): run `make up` first, or `make demo`", d.kubeconfig)
	}
	helmHome := filepath.Join(root, ".cache", "helm")
	d.helmEnv = append(os.Environ(), "KUBECONFIG="+d.kubeconfig,
		"HELM_CACHE_HOME="+filepath.Join(helmHome, "cache"), "HELM_CONFIG_HOME="+filepath.Join(helmHome, "config"),
		"HELM_DATA_HOME="+filepath.Join(helmHome, "data"))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if !*keep {
		defer d.down()
	}
	for _, chart := range charts {
		// Plain installs: the cluster's process runner gives every pod its own listen
		// address, as a kubelet gives it its own network.
		args := []string{"upgrade", "--install", chart, filepath.Join(root, "charts", chart),
			"--namespace", chart, "--create-namespace", "--wait", "--timeout", "5m"}
		switch chart {
		case "node-agent":
			// Every simulated node is this host: each agent keeps its state and PV tree in a
			// directory of its node under the cluster's state ($(NODE_NAME) is expanded per
			// pod; the later flags win). Its disks are its node's loop devices (the runner's
			// image rule passes them).
			base := filepath.Join(root, ".local", "state", "node-agent")
			nodes, err := d.nodes()
			if err != nil {
				return err
			}
			for _, n := range nodes {
				for _, sub := range []string{"agent", "pv"} {
					if err := os.MkdirAll(filepath.Join(base, sub, n), 0o755); err != nil {
						return err
					}
				}
			}
			args = append(args, "--set", "agentRoot="+filepath.Join(base, "agent"), "--set", "pvRoot="+filepath.Join(base, "pv"),
				"--set", "extraArgs={--agent-root="+filepath.Join(base, "agent", "$(NODE_NAME)")+",--pv-root="+filepath.Join(base, "pv", "$(NODE_NAME)")+"}")
		case "veltrix-operator":
			// The operator asks the agents to bind-mount disks below the agents' own PV
			// tree (the node-agent case below): the two pvRoot values must agree.
			args = append(args, "--set", "pvRoot="+filepath.Join(root, ".local", "state", "node-agent", "pv", "$(NODE_NAME)"))
		case "vald-operator":
			// No Vald Helm Operator runs here to bring its ValdRelease CRD.
			args = append(args, "--set", "installValdReleaseCRD=true")
		}
		fmt.Printf("helm install %s\n", chart)
		if err := d.tool(ctx, "helm", args...); err != nil {
			if ctx.Err() != nil {
				return nil // Ctrl-C: a requested stop, not a failure
			}
			return fmt.Errorf("installing chart %s: %w", chart, err)
		}
	}
	// The Vald Helm Operator's stand-in (tools/cmd/vald-helm-sim) sets the ValdReleases'
	// status, as the real one would; it needs the CRD the vald-operator chart installed.
	if err := d.tool(ctx, "kubectl", "apply", "-f", filepath.Join(root, "deploy", "local", "vald-helm-operator.yaml")); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("applying the Vald Helm Operator stand-in: %w", err)
	}
	// The samples' clusters back up to the cluster's object store, with its keys in the
	// Secret backup-s3 of their namespace.
	if err := d.copyStoreKeys(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	if err := d.tool(ctx, "kubectl", "apply", "-f", filepath.Join(root, "deploy", "samples")); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("applying samples: %w", err)
	}
	fmt.Printf(`
The suite runs on the local cluster (kubeconfig %s).
  releases:  .cache/bin/helm list -A   (with KUBECONFIG set)
  logs:      .local/logs/<namespace>_<pod>_<container>.log
  backups:   every 2 minutes (vksb, mgsb) into the object store %s, bucket %s;
             the files: .local/state/volumes/<volume of objectstore/objectstore-data>/%s
  node agent diagnostics with grpcurl: see README.md ("Node agent diagnostics")
Samples the product issues have not reached yet stay without status.
`, d.kubeconfig, localcluster.ObjectStoreInClusterEndpoint, localcluster.ObjectStoreBucket, localcluster.ObjectStoreBucket)

	if *watch > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *watch)
		defer cancel()
	}
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for {
		fmt.Printf("\n--- %s (Ctrl-C stops)\n", time.Now().Format(time.TimeOnly))
		_ = d.tool(context.Background(), "kubectl", "get", "opsuite", "-A")
		_ = d.tool(context.Background(), "kubectl", "get", "pods", "-A", "-o", "wide", "--field-selector", "metadata.namespace!=kube-system")
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(ctx.Err(), context.Canceled) {
				return nil
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// tool runs kubectl (from the control-plane cache) or helm (pinned in tools/go.mod).
func (d demo) tool(ctx context.Context, name string, args ...string) error {
	path := filepath.Join(d.root, ".cache", "bin", name)
	if name == "kubectl" {
		path = d.kubectl()
		args = append([]string{"--kubeconfig", d.kubeconfig}, args...)
	}
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("%s is missing: run `make controlplane runtime-tools`", path)
	}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = d.helmEnv
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	return cmd.Run()
}

// copyStoreKeys writes the object store's keys (the Secret the local cluster made) into the
// Secret backup-s3 of namespace default, which the samples' spec.backup names.
func (d demo) copyStoreKeys(ctx context.Context) error {
	data := map[string]string{}
	for _, k := range []string{localcluster.ObjectStoreAccessKeyKey, localcluster.ObjectStoreSecretKeyKey} {
		var out bytes.Buffer
		cmd := exec.CommandContext(ctx, d.kubectl(), "--kubeconfig", d.kubeconfig, "get", "secret", localcluster.ObjectStoreName,
			"-n", localcluster.ObjectStoreNamespace, "-o", "jsonpath={.data."+k+"}")
		cmd.Stdout, cmd.Stderr = &out, os.Stderr
		err := cmd.Run()
		if err == nil && out.Len() == 0 {
			err = errors.New("no such key")
		}
		if err != nil {
			return fmt.Errorf("reading %s of the object store's Secret %s/%s (is the cluster up without --no-object-store?): %w",
				k, localcluster.ObjectStoreNamespace, localcluster.ObjectStoreName, err)
		}
		data[k] = out.String() // base64 already, as a Secret's data wants it
	}
	manifest := fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: backup-s3, namespace: default}\ndata: {%s: %s, %s: %s}\n",
		localcluster.ObjectStoreAccessKeyKey, data[localcluster.ObjectStoreAccessKeyKey], localcluster.ObjectStoreSecretKeyKey, data[localcluster.ObjectStoreSecretKeyKey])
	cmd := exec.CommandContext(ctx, d.kubectl(), "--kubeconfig", d.kubeconfig, "apply", "-f", "-")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(manifest), os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("writing the Secret backup-s3: %w", err)
	}
	return nil
}

func (d demo) kubectl() string { return filepath.Join(d.root, ".cache", "k8s", "v1.37.2", "kubectl") }

// nodes are the local cluster's node names, from the options `make up` saved.
func (d demo) nodes() ([]string, error) {
	o, err := localcluster.LoadOptions(filepath.Join(d.root, ".local"))
	if err != nil {
		return nil, fmt.Errorf("reading the local cluster's options: %w", err)
	}
	names := make([]string, 0, len(o.Nodes))
	for _, n := range o.Nodes {
		names = append(names, n.Name)
	}
	return names, nil
}

func (d demo) down() {
	fmt.Println("stopping the local cluster")
	cmd := exec.Command(filepath.Join(d.root, ".cache", "bin", "localcluster"), "down", "--repo", d.root)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo: stopping the local cluster:", err)
	}
}
