// Module node-agent is the node DaemonSet's gRPC server, released on its own.
module github.com/opsuite/suite/services/node-agent

go 1.26.0

require (
	github.com/opsuite/suite/proto v0.0.0
	github.com/opsuite/suite/shared v0.0.0
	google.golang.org/grpc v1.85.0
)

replace (
	github.com/opsuite/suite/proto => ../../proto
	github.com/opsuite/suite/shared => ../../shared
)
