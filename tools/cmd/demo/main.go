// Command demo starts a real control plane (etcd and kube-apiserver), installs the CRDs,
// runs the four operators and the node agent as processes against it, applies
// deploy/samples and prints them until interrupted.
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/opsuite/suite/shared/testenv"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

var operators = []string{"vald-operator", "veltrix-operator", "valkey-operator", "memgraph-operator"}

func run() error {
	watch := flag.Duration("for", 0, "stop after this long instead of waiting for Ctrl-C (0 waits)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	// Apart from the local cluster's .local/kubeconfig, so both can run.
	local := filepath.Join(root, ".local", "demo")
	logs := filepath.Join(local, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return err
	}
	env, err := testenv.Start(testenv.Options{})
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	kubeconfig := filepath.Join(local, "kubeconfig")
	if err := writeKubeconfig(env.Config, kubeconfig); err != nil {
		return err
	}
	bin, _ := testenv.BinDir()
	kubectl := func(args ...string) *exec.Cmd {
		cmd := exec.Command(filepath.Join(bin, "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		return cmd
	}

	var procs []*exec.Cmd
	defer func() {
		for _, p := range procs {
			_ = p.Process.Signal(syscall.SIGTERM)
		}
		for _, p := range procs {
			_ = p.Wait()
		}
	}()
	for i, op := range operators {
		args := []string{"--kubeconfig", kubeconfig, "--leader-election-namespace", "default",
			"--metrics-bind-address", "127.0.0.1:" + strconv.Itoa(18080+i),
			"--health-probe-bind-address", "127.0.0.1:" + strconv.Itoa(18180+i), "--log-format", "text"}
		p, err := start(filepath.Join(root, "bin", op), args, filepath.Join(logs, op+".log"))
		if err != nil {
			return err
		}
		procs = append(procs, p)
	}
	agentArgs, err := nodeAgentArgs(local, kubeconfig)
	if err != nil {
		return err
	}
	agent, err := start(filepath.Join(root, "bin", "node-agent"), agentArgs, filepath.Join(logs, "node-agent.log"))
	if err != nil {
		return err
	}
	procs = append(procs, agent)

	fmt.Printf("control plane: %s (kubeconfig %s)\nlogs: %s\n", env.Config.Host, kubeconfig, logs)
	if err := kubectl("apply", "-f", filepath.Join(root, "deploy", "samples")).Run(); err != nil {
		return fmt.Errorf("applying samples: %w", err)
	}
	if *watch > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *watch)
		defer cancel()
	}
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for {
		fmt.Printf("\n--- %s (Ctrl-C stops)\n", time.Now().Format(time.TimeOnly))
		_ = kubectl("get", "opsuite", "-A").Run()
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(ctx.Err(), context.Canceled) {
				fmt.Println("stopping")
				return nil
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// nodeAgentArgs runs the agent on loopback with a self-signed certificate and a private
// state directory; it reports on this machine's disks and prepares none unless asked.
func nodeAgentArgs(local, kubeconfig string) ([]string, error) {
	dir := filepath.Join(local, "node-agent")
	if err := os.MkdirAll(filepath.Join(dir, "pv"), 0o755); err != nil {
		return nil, err
	}
	cert, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := selfSigned(cert, key); err != nil {
		return nil, err
	}
	return []string{"--listen", "127.0.0.1:19443", "--node-name", "demo-node", "--kubeconfig", kubeconfig,
		"--tls-cert", cert, "--tls-key", key, "--agent-root", filepath.Join(dir, "root"), "--pv-root", filepath.Join(dir, "pv")}, nil
}

func selfSigned(certPath, keyPath string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "node-agent"},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return err
	}
	return os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)
}

func start(path string, args []string, logPath string) (*exec.Cmd, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("%s is missing: run `make build`", path)
	}
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", filepath.Base(path), err)
	}
	return cmd, nil
}

func writeKubeconfig(cfg *rest.Config, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["local"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "admin", Namespace: "default"}
	kc.CurrentContext = "local"
	return clientcmd.WriteToFile(*kc, path)
}
