package localcluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/opsuite/suite/tools/internal/podrunner"
)

func (o *Options) pki(name string) string { return filepath.Join(o.PKIDir(), name) }

func (o *Options) etcdArgs() []string {
	client := fmt.Sprintf("http://127.0.0.1:%d", o.EtcdClientPort())
	peer := fmt.Sprintf("http://127.0.0.1:%d", o.EtcdPeerPort())
	return []string{
		"--name=localcluster",
		"--data-dir=" + filepath.Join(o.StateDir(), "etcd"),
		"--listen-client-urls=" + client,
		"--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=localcluster=" + peer,
		"--listen-metrics-urls=",
		"--unsafe-no-fsync=true",
		"--quota-backend-bytes=2147483648",
		"--log-level=warn",
	}
}

func (o *Options) apiserverArgs() []string {
	return []string{
		"--etcd-servers=" + fmt.Sprintf("http://127.0.0.1:%d", o.EtcdClientPort()),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(o.APIServerPort()),
		"--tls-cert-file=" + o.pki("apiserver.crt"),
		"--tls-private-key-file=" + o.pki("apiserver.key"),
		"--client-ca-file=" + o.pki("ca.crt"),
		"--service-cluster-ip-range=" + o.ServiceCIDR,
		"--service-account-issuer=" + serviceAccount,
		"--service-account-key-file=" + o.pki("sa.pub"),
		"--service-account-signing-key-file=" + o.pki("sa.key"),
		"--authorization-mode=RBAC",
		"--enable-admission-plugins=NamespaceLifecycle,ServiceAccount,DefaultStorageClass,LimitRanger,ResourceQuota,DefaultTolerationSeconds,MutatingAdmissionWebhook,ValidatingAdmissionWebhook",
		"--allow-privileged=true",
		// The "kubernetes" Endpoints object may not hold a loopback address; clients in pods
		// reach the apiserver through KUBERNETES_SERVICE_HOST=127.0.0.1 instead.
		"--endpoint-reconciler-type=none",
		// The requests of workloads' ServiceAccounts, at Metadata level (auditPolicy): what
		// each operator did and was refused (tools/e2e's RBAC audit reads it).
		"--audit-policy-file=" + filepath.Join(o.StateDir(), "audit-policy.yaml"),
		"--audit-log-path=" + o.AuditLog(),
		"--audit-log-format=json",
		"--audit-log-maxsize=200",
		"--audit-log-maxbackup=1",
		"--profiling=false",
		"--v=1",
	}
}

// AuditLog is the API server's audit log: one JSON audit.k8s.io/v1 Event a line.
func (o *Options) AuditLog() string { return filepath.Join(o.LogDir(), "audit.log") }

// auditPolicy records, at Metadata level (who, verb, resource, response code; no bodies,
// so no Secret's data), the requests of ServiceAccounts outside kube-system: the
// operators', the node agents' and the workloads'. The control plane's own controllers
// (kube-system) and the admin are left out, which keeps the log small.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: None
    userGroups: ["system:serviceaccounts:kube-system"]
  - level: Metadata
    userGroups: ["system:serviceaccounts"]
  - level: None
`

func (o *Options) kcmArgs() []string {
	kc := o.componentKubeconfig("kube-controller-manager")
	return []string{
		"--kubeconfig=" + kc,
		"--authentication-kubeconfig=" + kc,
		"--authorization-kubeconfig=" + kc,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(o.KCMPort()),
		"--controllers=*",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + o.pki("sa.key"),
		"--root-ca-file=" + o.pki("ca.crt"),
		"--cluster-signing-cert-file=" + o.pki("ca.crt"),
		"--cluster-signing-key-file=" + o.pki("ca.key"),
		"--service-cluster-ip-range=" + o.ServiceCIDR,
		"--cert-dir=" + filepath.Join(o.StateDir(), "kube-controller-manager"),
		"--leader-elect=false",
		"--profiling=false",
		"--v=1",
	}
}

func (o *Options) schedulerArgs() []string {
	kc := o.componentKubeconfig("kube-scheduler")
	return []string{
		"--kubeconfig=" + kc,
		"--authentication-kubeconfig=" + kc,
		"--authorization-kubeconfig=" + kc,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(o.SchedulerPort()),
		"--cert-dir=" + filepath.Join(o.StateDir(), "kube-scheduler"),
		"--leader-elect=false",
		"--profiling=false",
		"--v=1",
	}
}

func (o *Options) kwokArgs() []string {
	return []string{
		"--kubeconfig=" + o.componentKubeconfig("kwok"),
		"--config=" + filepath.Join(o.StateDir(), "kwok.yaml"),
		"--manage-nodes-with-annotation-selector=" + kwokNodeAnnotation + "=fake",
		"--cidr=" + o.PodCIDR,
		"--node-ip=127.0.0.1",
		"--server-address=" + fmt.Sprintf("127.0.0.1:%d", o.KwokPort()),
		"--node-lease-duration-seconds=40",
	}
}

const kwokNodeAnnotation = "kwok.x-k8s.io/node"

// writeComponentConfig writes the kubeconfigs, the audit policy and kwok's stage configuration.
func (o *Options) writeComponentConfig() error {
	for _, id := range clientIdentities {
		if err := o.writeKubeconfig(o.componentKubeconfig(id.file), id.file); err != nil {
			return err
		}
	}
	stages, err := renderStages(podrunner.Rules(o.ImageRules), !o.DisableRunner, o.VolumeDir())
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.StateDir(), "audit-policy.yaml"), []byte(auditPolicy), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(o.StateDir(), "kwok.yaml"), stages, 0o644)
}

// httpClient trusts the cluster CA and presents the admin certificate.
func (o *Options) httpClient() (*http.Client, error) {
	caPEM, err := os.ReadFile(o.pki("ca.crt"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	cert, err := tls.LoadX509KeyPair(o.pki("admin.crt"), o.pki("admin.key"))
	if err != nil {
		return nil, err
	}
	return &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			Proxy: nil,
			TLSClientConfig: &tls.Config{
				RootCAs:            pool,
				Certificates:       []tls.Certificate{cert},
				InsecureSkipVerify: false,
			},
		},
	}, nil
}

// waitHTTP polls url until it answers 200 or ctx ends; done reports an exited process.
func waitHTTP(ctx context.Context, c *http.Client, url string, p *process) error {
	var last string
	for {
		resp, err := c.Get(url)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, body)
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not healthy at %s (last answer: %s)", p.name, url, last)
		case <-p.done:
			return fmt.Errorf("%s exited: %w", p.name, p.err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
