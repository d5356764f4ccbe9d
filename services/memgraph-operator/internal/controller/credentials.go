package controller

import (
	"context"
	"fmt"
	"strings"

	"github.com/opsuite/suite/services/memgraph-operator/internal/executor"
	"github.com/opsuite/suite/services/memgraph-operator/internal/resources"
	"github.com/opsuite/suite/shared/conditions"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// The operator's own Secret next to the cluster keeps the credentials that last logged in
// to the MAIN: Memgraph takes MEMGRAPH_USER/MEMGRAPH_PASSWORD only on a first start with
// no users, so after the user's Secret changes these are the only way in to apply it.
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;create;patch

// CredentialSyncer makes the MAIN accept the wanted credentials, through lastGood when
// it still holds those (executor.SyncCredentials).
type CredentialSyncer interface {
	SyncCredentials(ctx context.Context, mainBolt string, want, lastGood Credentials) executor.CredentialOutcome
}

// ConditionCredentialsSynced says whether spec.auth's Secret logs in to Memgraph.
const ConditionCredentialsSynced = "CredentialsSynced"

// Credentials reasons; each is also the reason of the event its transition records.
const (
	ReasonCredentialsCurrent  = "CredentialsCurrent"
	ReasonCredentialsRotated  = "CredentialsRotated"
	ReasonCredentialsRotating = "CredentialsRotating"
	ReasonCredentialsRejected = "CredentialsRejected"
	// ReasonCredentialsUserKept: after a rename the old user could not be dropped.
	ReasonCredentialsUserKept = "CredentialsOldUserKept"
)

const (
	msgCredentialsCurrent  = "The user and password in spec.auth's Secret log in to the MAIN"
	msgCredentialsRotated  = "The changed spec.auth Secret was applied to Memgraph through the credentials that last worked; the operator logs in with it"
	msgCredentialsRotating = "spec.auth's Secret changed: the operator applies it to Memgraph through the credentials that last worked, retrying each pass (the operator's log has the cause of a failed attempt)"
	msgRejectedWithRecord  = "Neither the user and password in spec.auth's Secret nor the last ones that worked log in to the MAIN: " +
		"put the credentials Memgraph holds into the Secret, or set the Secret's password in Memgraph by hand " +
		"(SET PASSWORD FOR <user> TO '<password>' on the MAIN); the operator retries each pass"
	msgRejectedNoRecord = "The user and password in spec.auth's Secret do not log in to the MAIN and the operator has no earlier credentials on record: " +
		"Memgraph takes MEMGRAPH_USER/MEMGRAPH_PASSWORD only on a first start with no users, so put the credentials Memgraph holds into the Secret; " +
		"the operator then applies later changes itself"
)

// Keys of the operator's credentials Secret.
const (
	lastGoodUserKey     = "username"
	lastGoodPasswordKey = "password"
)

// CredentialsSecretName is the operator-owned Secret holding the last credentials that
// logged in to cluster's MAIN.
func CredentialsSecretName(cluster string) string { return cluster + "-operator-credentials" }

// credentialsFinding is what the credentials step found, for the status.
type credentialsFinding struct {
	checked bool
	reason  string
	msg     string
}

// syncCredentials checks spec.auth's credentials against the MAIN and applies a change
// through the last-good ones, then records what works. Only writing the record can fail
// the pass; Memgraph's answers become the condition. While members do not answer the
// operator (Registration.Unanswered) it changes nothing, credentials included: the
// condition keeps what the last check said.
func (p *pass) syncCredentials(ctx context.Context, want Credentials) error {
	cs := p.ctl.cfg.Credentials
	if p.c.Spec.Auth == nil || cs == nil || p.reg == nil || p.reg.MainBolt == "" || len(p.reg.Unanswered) > 0 {
		return nil
	}
	lastGood, err := p.lastGoodCredentials(ctx)
	if err != nil {
		return err
	}
	out := cs.SyncCredentials(ctx, p.reg.MainBolt, want, lastGood)
	logger := log.FromContext(ctx).WithValues("memgraphCluster", p.c.Name, "main", p.reg.Main)
	f := credentialsFinding{checked: true}
	switch out.State {
	case executor.CredentialsCurrent:
		f.reason, f.msg = ReasonCredentialsCurrent, msgCredentialsCurrent
	case executor.CredentialsRotated:
		f.reason, f.msg = ReasonCredentialsRotated, msgCredentialsRotated
		logger.Info("Applied the changed auth Secret to Memgraph", "commands", strings.Join(out.Executed, "; "))
	case executor.CredentialsRejected:
		f.reason, f.msg = ReasonCredentialsRejected, msgRejectedNoRecord
		if !lastGood.Zero() && lastGood != want {
			f.msg = msgRejectedWithRecord
		}
		logger.Info("Memgraph refused the auth Secret's credentials and the last-good ones", "error", out.Err)
	default:
		if lastGood == want {
			// Nothing to apply; an unreachable MAIN is the registration's business.
			f.checked = false
		} else {
			f.reason, f.msg = ReasonCredentialsRotating, msgCredentialsRotating
		}
		logger.Info("Could not check or apply the auth Secret's credentials", "state", out.State, "executed", strings.Join(out.Executed, "; "), "error", out.Err)
	}
	p.creds = f
	if out.KeptUser != "" {
		p.warning(ReasonCredentialsUserKept, fmt.Sprintf("Kept user %q after the rename to %q: Memgraph refused to drop it (%s); drop it by hand once the new user holds the privileges you need",
			out.KeptUser, want.Username, out.KeptReason))
	}
	if out.Working.Zero() || out.Working == lastGood {
		return nil
	}
	return p.recordCredentials(ctx, out.Working)
}

func (p *pass) lastGoodCredentials(ctx context.Context) (Credentials, error) {
	var s corev1.Secret
	err := p.ctl.secrets.Get(ctx, types.NamespacedName{Namespace: p.c.Namespace, Name: CredentialsSecretName(p.c.Name)}, &s)
	switch {
	case apierrors.IsNotFound(err):
		return Credentials{}, nil
	case err != nil:
		return Credentials{}, fmt.Errorf("read the operator's credentials Secret: %w", err)
	}
	return Credentials{Username: string(s.Data[lastGoodUserKey]), Password: string(s.Data[lastGoodPasswordKey])}, nil
}

// recordCredentials writes the operator's Secret (owned by the cluster, so it goes with it).
func (p *pass) recordCredentials(ctx context.Context, c Credentials) error {
	s := &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{
			Name: CredentialsSecretName(p.c.Name), Namespace: p.c.Namespace, Labels: resources.ClusterLabels(p.c.Name),
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{lastGoodUserKey: []byte(c.Username), lastGoodPasswordKey: []byte(c.Password)},
	}
	if err := controllerutil.SetControllerReference(p.c, s, p.ctl.client.Scheme()); err != nil {
		return err
	}
	if err := p.ctl.apply.Apply(ctx, s); err != nil {
		return fmt.Errorf("recording the last-good credentials in Secret %s: %w", s.Name, err)
	}
	return nil
}

// setCredentialsSynced: absent without spec.auth; a Current pass after a True condition
// keeps its reason (CredentialsRotated stays visible, and no second event follows it).
func (p *pass) setCredentialsSynced(set setFunc) {
	st := &p.c.Status
	if p.c.Spec.Auth == nil {
		meta.RemoveStatusCondition(&st.Conditions, ConditionCredentialsSynced)
		return
	}
	f := p.creds
	if !f.checked {
		return
	}
	switch f.reason {
	case ReasonCredentialsCurrent:
		if cur := conditions.Get(st.Conditions, ConditionCredentialsSynced); cur != nil && cur.Status == metav1.ConditionTrue {
			set(ConditionCredentialsSynced, metav1.ConditionTrue, cur.Reason, cur.Message)
			return
		}
		set(ConditionCredentialsSynced, metav1.ConditionTrue, f.reason, f.msg)
	case ReasonCredentialsRotated:
		set(ConditionCredentialsSynced, metav1.ConditionTrue, f.reason, f.msg)
	default:
		set(ConditionCredentialsSynced, metav1.ConditionFalse, f.reason, f.msg)
	}
}

func (p *pass) warning(reason, message string) {
	p.ctl.recorder.Eventf(p.c, nil, corev1.EventTypeWarning, reason, reason, "%s", message)
}
