// Package memgraph is the operator's only Memgraph client: the one package that imports
// the Bolt driver (github.com/neo4j/neo4j-go-driver/v5), behind the narrow Dialer and
// Session interfaces so the registration code can be driven by any implementation.
//
// Connections are direct (bolt://, never routing: a management query must reach the
// coordinator it was meant for) and every call is bounded by Options.Timeout. Admin
// commands run as autocommit queries (Memgraph refuses them inside BEGIN/COMMIT), so the
// values they carry are inlined into the text by the builders in query.go, which quote
// and escape them; nothing is passed as a parameter.
//
// Errors are *Error values whose Kind tells the caller what happened: Unreachable (the
// address could not be dialled or the connection broke), Unauthenticated, Refused (the
// server answered with a FAILURE; Code and Message are the server's, and Refusal
// classifies Memgraph's known messages) and Protocol (an answer of an unexpected shape).
// "No leader" is not an error: it is read from SHOW INSTANCES (LeaderOf).
package memgraph
