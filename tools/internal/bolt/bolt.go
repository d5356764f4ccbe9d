// Package bolt is a small Bolt protocol server (versions 5.2 down to 4.1, PackStream v1)
// for the data-plane simulators: it speaks the wire protocol and leaves query semantics to
// a Conn supplied per connection, so the simulator stays free of framing concerns.
package bolt

import "context"

// ServerAgent is what Memgraph reports in HELLO's SUCCESS; drivers log it and some tools
// detect Memgraph by it.
const ServerAgent = "Neo4j/v5.11.0 compatible graph database server - Memgraph"

// CodeMemgraphError is the FAILURE code Memgraph sends for every query error that carries no
// more precise code; errors that are not a *Failure are reported with it.
const CodeMemgraphError = "Memgraph.ClientError.MemgraphError.MemgraphError"

// CodeUnauthenticated is Memgraph's FAILURE code for a rejected HELLO/LOGON.
const CodeUnauthenticated = "Memgraph.ClientError.Security.Unauthenticated"

// Auth is the authentication token of HELLO (Bolt <= 5.0) or LOGON (Bolt >= 5.1).
type Auth struct{ Scheme, Principal, Credentials string }

// Conn is the query side of one Bolt connection. The server calls it from a single
// goroutine per connection, so implementations need no locking of their own per-connection
// state.
type Conn interface {
	// Authenticate accepts or rejects the client; an error becomes a FAILURE (a *Failure keeps
	// its code, anything else is reported as CodeUnauthenticated).
	Authenticate(userAgent string, a Auth) error
	// Run executes one query; the server streams the Result's records on PULL.
	Run(ctx context.Context, q Query) (*Result, error)
	// Begin opens an explicit transaction; mode is "r" or "w".
	Begin(mode string, db string) error
	// Commit ends the explicit transaction and returns its bookmark (may be empty).
	Commit() (bookmark string, err error)
	// Rollback abandons the explicit transaction.
	Rollback() error
	// Route answers the ROUTE message (Bolt 4.3+) for db ("" = default database).
	Route(db string) (*RoutingTable, error)
	// Close is called once when the connection ends, whatever the reason.
	Close()
}

// Query is one RUN message.
type Query struct {
	Text   string
	Params map[string]any
	// InTx is true when the query runs inside BEGIN ... COMMIT/ROLLBACK (Memgraph refuses
	// admin queries there, so the simulator needs to know).
	InTx bool
	DB   string
	// Mode is "r" or "w" (the driver's access mode; "w" when the client sent none).
	Mode string
}

// Result is a fully materialised query result; the server streams Records on PULL.
type Result struct {
	Fields  []string
	Records [][]any
	// Type is the query type reported in the final SUCCESS: "r", "w", "rw" or "s".
	Type  string
	Stats map[string]any
}

// Failure is an error with a Bolt status code, sent to the client as FAILURE{code, message}.
type Failure struct{ Code, Message string }

func (f *Failure) Error() string { return f.Code + ": " + f.Message }

// DefaultDatabase is Memgraph's database name, reported in ROUTE when neither the
// RoutingTable nor the client names one.
const DefaultDatabase = "memgraph"

// RoutingTable is the answer to ROUTE; addresses are "host:port". DB may be left empty.
type RoutingTable struct {
	TTL                       int64
	DB                        string
	Routers, Writers, Readers []string
}

// Node is a graph node value; it packs as a Bolt Node structure (with element_id on 5.x).
type Node struct {
	ID        int64
	ElementID string
	Labels    []string
	Props     map[string]any
}
