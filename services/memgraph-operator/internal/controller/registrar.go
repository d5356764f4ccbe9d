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
	o, d := b.dialer(ctx, creds)
	out, err := executor.Reconcile(ctx, d, want)
	r := registrationOf(out, want)
	r.Converged, r.RetiredCoordinators, r.RetiredData, r.Executed = out.Converged, out.RetiredCoordinators, out.RetiredData, out.Executed
	if bt := BoltTLSOf(ctx); err == nil && r.Converged && bt.Cert != nil {
		// Only on a converged cluster: the reload is upkeep, never ahead of membership.
		r.Executed = append(r.Executed, reloadRenewed(ctx, o, want, bt.Cert)...)
	}
	tlsFailure(ctx, d, &r)
	if out.Lag != nil {
		r.LagRead = true
		for _, l := range out.Lag {
			if !l.CaughtUp() {
				r.Lagging = append(r.Lagging, l.Instance)
			}
		}
	}
	return r, err
}

// observeTimeout bounds one observation: a few SHOW INSTANCES, on the poll's schedule.
const observeTimeout = 10 * time.Second

// Observe implements Observer with executor.Observe: the leader's view, no command.
func (b BoltRegistrar) Observe(ctx context.Context, _ *memgraphv1.MemgraphCluster, creds Credentials, want planner.Desired) (Registration, error) {
	ctx, cancel := context.WithTimeout(ctx, observeTimeout)
	defer cancel()
	_, d := b.dialer(ctx, creds)
	out, err := executor.Observe(ctx, d, want)
	r := registrationOf(out, want)
	tlsFailure(ctx, d, &r)
	return r, err
}

// replaceLostTimeout bounds one lost-member step: a discovery and a few removals.
const replaceLostTimeout = 30 * time.Second

// ReplaceLost implements LostReplacer with executor.ReplaceLost.
func (b BoltRegistrar) ReplaceLost(ctx context.Context, _ *memgraphv1.MemgraphCluster, creds Credentials, want planner.Desired, in planner.LostInput) (executor.LostOutcome, error) {
	ctx, cancel := context.WithTimeout(ctx, replaceLostTimeout)
	defer cancel()
	_, d := b.dialer(ctx, creds)
	return executor.ReplaceLost(ctx, d, want, in)
}

// dialer dials as creds, verifying with the pass's CA, and records failed handshakes.
func (b BoltRegistrar) dialer(ctx context.Context, creds Credentials) (memgraph.Options, *tlsRecorder) {
	o := b.Options
	o.Username, o.Password = creds.Username, creds.Password
	o.CA = BoltCA(ctx)
	return o, &tlsRecorder{Dialer: memgraph.NewDialer(o)}
}

// tlsFailure says why the coordinators were unreachable when a handshake failed: the
// cause is the certificate.
func tlsFailure(ctx context.Context, d *tlsRecorder, r *Registration) {
	if herr := d.failure(); herr != nil && r.Reason == memgraphv1.ReasonCoordinatorUnreachable {
		r.Reason, r.Message = memgraphv1.ReasonTLSVerificationFailed, msgTLSVerification
		log.FromContext(ctx).Error(herr, "Bolt TLS handshake failed")
	}
}

// registrationOf is what an executor outcome says about the membership, as status reads it.
func registrationOf(out executor.Outcome, want planner.Desired) Registration {
	r := Registration{
		Leader: out.Leader, Main: out.Main, Reason: out.Reason, Message: out.Message,
		CoordinatorsBehind: out.CoordinatorsBehind, Unanswered: out.Unanswered, View: executor.ViewKey(out),
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
	return r
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
