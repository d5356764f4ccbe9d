package memgraph

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"
)

// Kind says what went wrong with a call.
type Kind int

const (
	// KindUnreachable: the address could not be dialled, the connection broke or the
	// call timed out before an answer arrived.
	KindUnreachable Kind = iota + 1
	// KindUnauthenticated: the server refused the credentials.
	KindUnauthenticated
	// KindRefused: the server answered the query with a FAILURE (Code, Message).
	KindRefused
	// KindProtocol: the server answered, but not in the shape the query has.
	KindProtocol
	// KindTLS: the TCP connection was made but the TLS handshake failed: the server's
	// certificate is not verified by the CA (another CA, expired, or not naming the
	// address dialled), or the server does not speak TLS.
	KindTLS
)

func (k Kind) String() string {
	switch k {
	case KindUnreachable:
		return "unreachable"
	case KindUnauthenticated:
		return "unauthenticated"
	case KindRefused:
		return "refused"
	case KindProtocol:
		return "protocol"
	case KindTLS:
		return "tls"
	}
	return "unknown"
}

// Error is every error this package returns.
type Error struct {
	Kind    Kind
	Addr    string // the Bolt address the session was dialled to
	Query   string // the query, "" for the connection itself
	Code    string // the server's FAILURE code (KindRefused, KindUnauthenticated)
	Message string // the server's FAILURE message, verbatim
	Err     error  // the underlying error
	// Timeout is the call's own limit (Options.Timeout) when it ran out before an answer
	// came (KindUnreachable: the packets may be dropped on the way), else 0.
	Timeout time.Duration
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("memgraph ")
	b.WriteString(e.Addr)
	if e.Query != "" {
		b.WriteString(" ")
		b.WriteString(firstWords(e.Query))
	}
	b.WriteString(": ")
	b.WriteString(e.Kind.String())
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	} else if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Refusal classifies the server's message (KindRefused only).
func (e *Error) Refusal() Refusal {
	if e.Kind != KindRefused {
		return RefusalNone
	}
	return ClassifyRefusal(e.Message)
}

// firstWords keeps an error short and free of inlined values: the command's keywords.
func firstWords(q string) string {
	if i := strings.Index(q, " WITH CONFIG"); i >= 0 {
		return q[:i]
	}
	return q
}

// Cause says in a few stable words why err left the caller without an answer, for a
// condition message: "no answer within 5s" when the call's own limit ran out (a member
// whose packets are dropped), "connection refused", "connection failed", or the kind of
// any other failure. Never the raw error, whose text carries ports and changes from one
// attempt to the next.
func Cause(err error) string {
	var e *Error
	switch {
	case err == nil:
		return ""
	case !errors.As(err, &e):
		return "connection failed"
	case e.Kind != KindUnreachable:
		return e.Kind.String()
	case e.Timeout > 0:
		return fmt.Sprintf("no answer within %s", e.Timeout)
	case errors.Is(err, syscall.ECONNREFUSED) || strings.Contains(err.Error(), "connection refused"):
		return "connection refused"
	}
	return "connection failed"
}

// NotListening says whether err is a refused connection: the member's address answered
// that nothing listens on the port (its process is down, or not started yet). That is no
// partition, in which packets are dropped and no answer comes: the coordinators see such a
// member down too, within their down timeout.
func NotListening(err error) bool {
	return IsUnreachable(err) && Cause(err) == "connection refused"
}

// IsUnreachable says whether err is (or wraps) a connection failure.
func IsUnreachable(err error) bool { return kindOf(err) == KindUnreachable }

// IsRefused says whether err is (or wraps) a server FAILURE answer.
func IsRefused(err error) bool { return kindOf(err) == KindRefused }

// IsTLS says whether err is (or wraps) a failed TLS handshake.
func IsTLS(err error) bool { return kindOf(err) == KindTLS }

// IsUnauthenticated says whether err is (or wraps) an authentication failure.
func IsUnauthenticated(err error) bool { return kindOf(err) == KindUnauthenticated }

// RefusalOf classifies err when it is a refusal, else RefusalNone.
func RefusalOf(err error) Refusal {
	var e *Error
	if errors.As(err, &e) {
		return e.Refusal()
	}
	return RefusalNone
}

func kindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return 0
}

// Refusal is a known Memgraph refusal, recognised from its message (Memgraph sends one
// code, Memgraph.ClientError.MemgraphError.MemgraphError, for all of them).
type Refusal int

const (
	RefusalNone Refusal = iota
	// RefusalOther is a refusal whose message is none of the known ones.
	RefusalOther
	// RefusalMainExists: SET INSTANCE TO MAIN while the cluster has a MAIN.
	RefusalMainExists
	// RefusalNoSuchInstance: a name the cluster does not have.
	RefusalNoSuchInstance
	// RefusalAliveMain: UNREGISTER INSTANCE of the alive MAIN.
	RefusalAliveMain
	// RefusalLeaderRemoval: REMOVE COORDINATOR of the current leader.
	RefusalLeaderRemoval
	// RefusalAlreadyReplica: DEMOTE INSTANCE of a replica.
	RefusalAlreadyReplica
	// RefusalInstanceExists: REGISTER INSTANCE of a registered name.
	RefusalInstanceExists
	// RefusalCoordinatorExists: ADD COORDINATOR of an id already in the cluster.
	RefusalCoordinatorExists
	// RefusalRaftWrite: the leader could not commit to its Raft log; retry later.
	RefusalRaftWrite
	// RefusalNotLeader: the coordinator is not the leader (and did not forward), or the
	// leader it forwarded to failed.
	RefusalNotLeader
	// RefusalReplicaWrite: a write on a replica.
	RefusalReplicaWrite
	// RefusalCoordinatorOnly: a data query sent to a coordinator.
	RefusalCoordinatorOnly
	// RefusalNotCoordinator: an HA query sent to a data instance.
	RefusalNotCoordinator
	// RefusalInTransaction: an admin query inside an explicit transaction.
	RefusalInTransaction
	// RefusalNoLeader: the coordinator is not the leader and knows none to forward to.
	RefusalNoLeader
	// RefusalModeMix: REGISTER INSTANCE would put SYNC and STRICT_SYNC replicas in one
	// cluster.
	RefusalModeMix
)

var refusalNames = [...]string{
	RefusalNone: "none", RefusalOther: "other", RefusalMainExists: "main-exists",
	RefusalNoSuchInstance: "no-such-instance", RefusalAliveMain: "alive-main",
	RefusalLeaderRemoval: "leader-removal", RefusalAlreadyReplica: "already-replica",
	RefusalInstanceExists: "instance-exists", RefusalCoordinatorExists: "coordinator-exists",
	RefusalRaftWrite: "raft-write", RefusalNotLeader: "not-leader",
	RefusalReplicaWrite: "replica-write", RefusalCoordinatorOnly: "coordinator-only",
	RefusalNotCoordinator: "not-coordinator", RefusalInTransaction: "in-transaction",
	RefusalNoLeader: "no-leader", RefusalModeMix: "mode-mix",
}

func (r Refusal) String() string {
	if int(r) < len(refusalNames) {
		return refusalNames[r]
	}
	return "unknown"
}

// refusalPatterns maps fragments of Memgraph's messages to their class; the first match
// wins, so the more specific fragments come first.
var refusalPatterns = []struct {
	fragment string
	refusal  Refusal
}{
	{"both strict_sync and sync replicas", RefusalModeMix},
	{"already a main instance", RefusalMainExists},
	{"no instance with such name", RefusalNoSuchInstance},
	{"alive main instance can't be unregistered", RefusalAliveMain},
	{"current leader cannot be removed", RefusalLeaderRemoval},
	{"is already a replica", RefusalAlreadyReplica},
	{"instance with such name already exists", RefusalInstanceExists},
	{"coordinator since instance with such id already exists", RefusalCoordinatorExists},
	{"writing to raft log failed", RefusalRaftWrite},
	{"knows no leader", RefusalNoLeader},
	{"no leader", RefusalNoLeader},
	{"forwarded to the leader but leader failed", RefusalNotLeader},
	{"coordinator is not a leader", RefusalNotLeader},
	{"is not a leader", RefusalNotLeader},
	{"lost leadership", RefusalNotLeader},
	{"write queries are forbidden on the replica", RefusalReplicaWrite},
	{"coordinator can run only coordinator queries", RefusalCoordinatorOnly},
	{"only coordinator can", RefusalNotCoordinator},
	{"not allowed in multicommand transactions", RefusalInTransaction},
}

// ClassifyRefusal recognises one of Memgraph's refusal messages.
func ClassifyRefusal(message string) Refusal {
	m := strings.ToLower(message)
	for _, p := range refusalPatterns {
		if strings.Contains(m, p.fragment) {
			return p.refusal
		}
	}
	return RefusalOther
}
