package controller

import (
	"context"
	"time"

	memgraphv1 "github.com/opsuite/suite/api/memgraph/v1alpha1"
	"github.com/opsuite/suite/services/memgraph-operator/internal/executor"
	"github.com/opsuite/suite/services/memgraph-operator/internal/memgraph"
	"github.com/opsuite/suite/services/memgraph-operator/internal/planner"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// registrationTimeout bounds one registration pass, so a hanging member cannot hold the
// controller's worker.
const registrationTimeout = 60 * time.Second

// BoltRegistrar is the Registrar over Memgraph's Bolt protocol: executor.Reconcile
// against the leader the coordinators name.
type BoltRegistrar struct {
	// Options are the dial options; each pass replaces Username and Password with the
	// cluster's current credentials.
	Options memgraph.Options
}

// Register implements Registrar.
func (b BoltRegistrar) Register(ctx context.Context, _ *memgraphv1.MemgraphCluster, creds Credentials, want planner.Desired) (Registration, error) {
	ctx, cancel := context.WithTimeout(ctx, registrationTimeout)
	defer cancel()
	o := b.Options
	o.Username, o.Password = creds.Username, creds.Password
	o.CA = BoltCA(ctx)
	d := &tlsRecorder{Dialer: memgraph.NewDialer(o)}
	out, err := executor.Reconcile(ctx, d, want)
	r := Registration{
		Leader: out.Leader, Main: out.Main, Converged: out.Converged, Reason: out.Reason, Message: out.Message,
		RetiredCoordinators: out.RetiredCoordinators, RetiredData: out.RetiredData, Executed: out.Executed,
		CoordinatorsBehind: out.CoordinatorsBehind,
	}
	if bt := BoltTLSOf(ctx); err == nil && r.Converged && bt.Cert != nil {
		// Only on a converged cluster: the reload is upkeep, never ahead of membership.
		r.Executed = append(r.Executed, reloadRenewed(ctx, o, want, bt.Cert)...)
	}
	if herr := d.failure(); herr != nil && r.Reason == memgraphv1.ReasonCoordinatorUnreachable {
		// Unreachable because the handshake failed: say so, the cause is the certificate.
		r.Reason, r.Message = memgraphv1.ReasonTLSVerificationFailed, msgTLSVerification
		log.FromContext(ctx).Error(herr, "Bolt TLS handshake failed")
	}
	if out.Lag != nil {
		r.LagRead = true
		for _, l := range out.Lag {
			if !l.CaughtUp() {
				r.Lagging = append(r.Lagging, l.Instance)
			}
		}
	}
	if out.Leader != "" && out.Instances != nil {
		r.DataRoles = map[string]string{}
	}
	for _, i := range out.Instances {
		if i.Name == out.Main && out.Main != "" {
			r.MainBolt = executor.DialAddress(want, i)
		}
		if r.DataRoles != nil && !i.IsCoordinator() && i.Up() && (i.Role == memgraph.RoleMain || i.Role == memgraph.RoleReplica) {
			r.DataRoles[i.Name] = i.Role
		}
		if i.IsCoordinator() {
			r.Coordinators++
		} else {
			r.DataInstances++
		}
	}
	return r, err
}

// credentialsTimeout bounds one credentials check (up to three logins and four commands).
const credentialsTimeout = 30 * time.Second

// SyncCredentials implements CredentialSyncer with executor.SyncCredentials.
func (b BoltRegistrar) SyncCredentials(ctx context.Context, mainBolt string, want, lastGood Credentials) executor.CredentialOutcome {
	ctx, cancel := context.WithTimeout(ctx, credentialsTimeout)
	defer cancel()
	dial := func(c executor.Credentials) memgraph.Dialer {
		o := b.Options
		o.Username, o.Password = c.Username, c.Password
		o.CA = BoltCA(ctx)
		return memgraph.NewDialer(o)
	}
	return executor.SyncCredentials(ctx, dial, mainBolt, want, lastGood)
}
