// Command localcluster starts and stops the local Kubernetes cluster: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and kwok on loopback, with simulated nodes and
// pods of known images run as real processes.
//
//	localcluster up [flags]      start in the background, return once ready
//	localcluster down [--keep]   stop everything, remove the cluster's files
//	localcluster status          print whether the cluster runs and its processes' memory
//	localcluster outage [--for 20s]
//	                             stop kube-apiserver and etcd for a while, then start them
//	                             again on their data; returns once the API server is ready
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/opsuite/suite/tools/internal/localcluster"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "localcluster:", err)
		os.Exit(1)
	}
}

type options struct {
	dir, repoRoot, poolPrefix, poolNamespace  string
	lbCIDR                                    string
	portBase, general, agent, instance, disks int
	keep, noRunner, noObjectStore             bool
	outage                                    time.Duration
}

func run(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: localcluster up|down|status|outage [flags]")
	}
	if handled, err := localcluster.Dispatch(args); handled {
		return err
	}
	cmd, args := args[0], args[1:]
	var opts options
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.StringVar(&opts.repoRoot, "repo", "", "repository root (default: the directory holding go.work above the working directory)")
	fs.StringVar(&opts.dir, "dir", "", "cluster directory (default: <repo>/.local)")
	fs.IntVar(&opts.instance, "instance", 0, "cluster number (0-59): instances use disjoint ports and address ranges and default to <repo>/.local-<n>")
	fs.IntVar(&opts.portBase, "port-base", 0, "first of six loopback ports (default 26443+10*instance)")
	fs.IntVar(&opts.general, "general-nodes", 2, "number of nodes with pool type general")
	fs.IntVar(&opts.agent, "agent-nodes", 2, "number of nodes with pool type agent")
	fs.IntVar(&opts.disks, "disks-per-node", 2, "loop devices (1 GiB sparse files) each node owns; its pods' hostPath /dev shows those alone")
	fs.StringVar(&opts.poolPrefix, "pool-label-prefix", "", "prefix of the node-pool labels <prefix>/namespace and <prefix>/type (default pool.opsuite.io, the charts' default)")
	fs.StringVar(&opts.poolNamespace, "pool-namespace", "default", "value of <prefix>/namespace on every node")
	fs.StringVar(&opts.lbCIDR, "load-balancer-cidr", "", "loopback pool of LoadBalancer Services' addresses (default 127.(4+4*instance).0.0/16)")
	fs.BoolVar(&opts.noRunner, "no-runner", false, "simulate every pod; run no processes (and no object store)")
	fs.BoolVar(&opts.noObjectStore, "no-object-store", false, "run no S3 server (versitygw) in the namespace objectstore")
	fs.BoolVar(&opts.keep, "keep", false, "down: keep state, logs and kubeconfig")
	fs.DurationVar(&opts.outage, "for", 20*time.Second, "outage: how long kube-apiserver and etcd stay stopped")
	if err := fs.Parse(args); err != nil {
		return err
	}
	root := opts.repoRoot
	if root == "" {
		var err error
		if root, err = findRepoRoot(); err != nil {
			return err
		}
	}
	if opts.instance < 0 || opts.instance > 59 {
		return fmt.Errorf("instance %d out of range 0-59", opts.instance)
	}
	o := localcluster.InstanceOptions(root, opts.instance)
	if opts.dir != "" {
		abs, err := filepath.Abs(opts.dir)
		if err != nil {
			return err
		}
		o.Dir = abs
	}

	switch cmd {
	case "up":
		if opts.portBase != 0 {
			o.PortBase = opts.portBase
		}
		o.Nodes = localcluster.DefaultNodes(opts.poolNamespace, opts.general, opts.agent, o.NodeIPPrefix)
		if opts.poolPrefix != "" {
			o.PoolLabelPrefix = opts.poolPrefix
		}
		if opts.lbCIDR != "" {
			o.LoadBalancerCIDR = opts.lbCIDR
		}
		o.DisableRunner = opts.noRunner
		o.ObjectStore = !opts.noRunner && !opts.noObjectStore
		o.DisksPerNode = opts.disks
		self, err := os.Executable()
		if err != nil {
			return err
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return localcluster.Up(ctx, o, self, os.Stdout)
	case "down":
		if saved, err := localcluster.LoadOptions(o.Dir); err == nil {
			o = saved
		}
		return localcluster.Down(o, opts.keep, os.Stdout)
	case "outage":
		saved, err := localcluster.LoadOptions(o.Dir)
		if err != nil {
			return fmt.Errorf("no cluster in %s: %w", o.Dir, err)
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		unreachable, err := localcluster.ControlPlaneOutage(ctx, saved, opts.outage)
		if err != nil {
			return err
		}
		fmt.Printf("kube-apiserver and etcd stopped for %s; the API server was unreachable for %s\n", opts.outage, unreachable.Round(100*time.Millisecond))
		return nil
	case "status":
		saved, err := localcluster.LoadOptions(o.Dir)
		if err != nil {
			fmt.Println("Cluster not running")
			return nil
		}
		var total int64
		for _, pid := range localcluster.ProcessIDs(saved) {
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
			rss := localcluster.RSS(pid)
			total += rss
			fmt.Printf("%8d %-28s %6d MiB\n", pid, strings.TrimSpace(string(comm)), rss>>20)
		}
		fmt.Printf("total RSS %d MiB; kubeconfig %s\n", total>>20, saved.Kubeconfig())
		if disks, err := localcluster.NodeDisks(saved); err == nil {
			for _, n := range saved.Nodes {
				fmt.Printf("node %-20s disks %s\n", n.Name, strings.Join(disks[n.Name], " "))
			}
		}
		return nil
	}
	return fmt.Errorf("unknown command %q", cmd)
}

func findRepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.work")); err == nil {
			return d, nil
		}
		if d == "/" {
			return "", errors.New("no go.work above the working directory; pass --repo")
		}
	}
}
