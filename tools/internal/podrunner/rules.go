package podrunner

import (
	"fmt"
	"net"
	"net/url"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/opsuite/suite/tools/internal/images"
)

// ImageRule maps container images to a host binary that stands in for the image. A rule
// says everything the image would have said: its executables, its ENV, its USER and
// WORKDIR, plus what the local cluster must add because pods share the host's network.
type ImageRule struct {
	// Image is a glob over the normalised repository name: no tag or digest, no
	// "docker.io/" or "library/" prefix ("redis*", "valkey/valkey*", "ghcr.io/opsuite/*").
	// "*" does not cross "/".
	Image string `json:"image"`
	// Binary is the host path of the stand-in; "{name}" expands to the last path element
	// of the repository ("ghcr.io/opsuite/node-agent" -> "node-agent").
	Binary string `json:"binary"`
	// Commands are the in-image executables (basenames) the binary replaces when they are
	// the first element of command+args; the binary's own basename always is one.
	Commands []string `json:"commands,omitempty"`
	// ExtraArgs are appended to the arguments, after $(VAR) expansion against the
	// container's environment and the node's variables (NodeVars, e.g. $(NODE_DEVICES));
	// they make an image's server bind to the pod address ("--bind", "$(POD_IP)").
	ExtraArgs []string `json:"extraArgs,omitempty"`
	// Subcommands are first arguments that start another program of the same binary
	// (node-agent's "signer"): that program gets no ExtraArgs, which are the server's.
	Subcommands []string `json:"subcommands,omitempty"`
	// ListenFlags name flags whose value is a listen address ("--metrics-bind-address").
	// A value without a host or with a wildcard one (":8443", "0.0.0.0:8443") becomes
	// "<pod IP>:8443": in its own network namespace, as on a kubelet, the process would
	// own the port; here every pod shares the host's, so it must bind its own address.
	ListenFlags []string `json:"listenFlags,omitempty"`
	// ListenEnv names environment variables whose value is a listen address, rewritten as
	// ListenFlags' values are: an image configured by its environment
	// (redis_exporter's REDIS_EXPORTER_WEB_LISTEN_ADDRESS).
	ListenEnv []string `json:"listenEnv,omitempty"`
	// LoopbackEnv names environment variables holding an address of the pod itself, a URL
	// or host:port ("redis://127.0.0.1:6379"): a loopback address (127.0.0.0/8, ::1)
	// becomes the pod's address. In its own network namespace a container reaches the
	// pod's other containers on loopback; here every pod shares the host's, and the pod's
	// servers listen on the pod's address. The name localhost stays: the pod's /etc/hosts
	// gives it the pod's address (hostsFile), and a TLS client keeps verifying that name.
	LoopbackEnv []string `json:"loopbackEnv,omitempty"`
	// Env is the image's ENV ("NAME=value"); the container's env overrides it.
	Env []string `json:"env,omitempty"`
	// User is the image's USER, numeric "uid[:gid]"; empty means root. It applies when the
	// securityContext sets no runAsUser, and runAsNonRoot is checked against it.
	User string `json:"user,omitempty"`
	// WorkingDir is the image's WORKDIR, used when the container sets none.
	WorkingDir string `json:"workingDir,omitempty"`
}

// ListenFlagsOpsuite are the listen-address flags of our binaries: controller-runtime's
// metrics and probe addresses, the node agent's gRPC and health listeners.
var ListenFlagsOpsuite = []string{"--metrics-bind-address", "--health-probe-bind-address", "--listen", "--health-listen"}

// NodeDevicesVar is the node-scoped variable holding the node's own disks
// ("/dev/loop3,/dev/loop4"), for ExtraArgs.
const NodeDevicesVar = "NODE_DEVICES"

// DefaultImageRules maps our images to the binaries `make build` writes to binDir, the
// Valkey images to Debian's valkey-server (bookworm-backports) and the Redis images to
// Debian's redis-server, so a ValkeyCluster's spec.image picks the server it runs, as on a
// real cluster. A simulator is one more line here.
func DefaultImageRules(binDir string) []ImageRule {
	opsuite := func(image string, extra ...string) ImageRule {
		return ImageRule{Image: image, Binary: filepath.Join(binDir, "{name}"), Commands: []string{"manager", "{name}"},
			ExtraArgs: extra, ListenFlags: ListenFlagsOpsuite, User: images.User}
	}
	// Both images carry both executable names (Valkey installs redis-* links; the operator
	// runs valkey-server whatever spec.image is). A pod's own network namespace would make
	// the server's outbound connections (cluster bus, replication) come from the pod's
	// address; here they share the host's, so bind-source-addr says so (a partition
	// between two pods' addresses then cuts both ways).
	server := func(image, binary, user string) ImageRule {
		return ImageRule{Image: image, Binary: binary,
			Commands:  []string{"redis-server", "valkey-server", "docker-entrypoint.sh"},
			ExtraArgs: []string{"--bind", "$(POD_IP)", "--bind-source-addr", "$(POD_IP)"}, User: user, WorkingDir: "/data"}
	}
	const valkeyServer, redisServer = "/usr/bin/valkey-server", "/usr/bin/redis-server"
	agent := opsuite("ghcr.io/opsuite/node-agent", "--allow-loop-devices", "--device-allow=$("+NodeDevicesVar+")")
	agent.Subcommands = []string{"signer"}
	return []ImageRule{
		// The node agent sees only its node's disks (loop devices the cluster attached); its
		// `signer` subcommand (the per-node certificates' CA) has no disks.
		agent,
		opsuite("ghcr.io/opsuite/*"),
		// The official images start as root (their entrypoint drops to redis); Bitnami's
		// run as 1001.
		server("valkey/valkey*", valkeyServer, ""),
		server("bitnami/valkey*", valkeyServer, "1001"),
		server("redis*", redisServer, ""),
		server("bitnami/redis*", redisServer, "1001"),
		// Simulators (tools/cmd/*-sim, built by `make build`). Memgraph's image runs
		// /usr/lib/memgraph/memgraph as memgraph (101:103) and binds 0.0.0.0 unless told;
		// the simulator binds all its listeners to --bolt-address's host.
		{Image: "memgraph/memgraph*", Binary: filepath.Join(binDir, "memgraph-sim"),
			Commands: []string{"memgraph", "docker-entrypoint.sh"}, ExtraArgs: []string{"--bolt-address=$(POD_IP)"},
			User: "101:103", WorkingDir: "/var/lib/memgraph"},
		// VeltrixDB's image is distroless with /veltrixdb as its entrypoint; its listeners
		// are --addr and --metrics-addr. Any registry: users run it from a mirror
		// (spec.image) as well as from ghcr.io.
		{Image: "*/veltrixdb/veltrixdb*", Binary: filepath.Join(binDir, "veltrix-sim"),
			Commands: []string{"veltrixdb"}, ListenFlags: []string{"--addr", "--metrics-addr"}},
		// versitygw, the S3 server (the local cluster's object store): its image's
		// entrypoint is /app/versitygw, run as root; --port (default :7070) is its
		// listener. The binary is the one `make objectstore` builds into .cache/bin, beside
		// binDir's repository.
		{Image: "versity/versitygw*", Binary: filepath.Join(filepath.Dir(binDir), ".cache", "bin", "versitygw"),
			Commands: []string{"versitygw"}, ListenFlags: []string{"--port", "-p"}},
		// redis_exporter, the Valkey operator's exporter sidecar (ghcr.io/oliver006, or
		// Docker Hub's copy): the tool `make runtime-tools` builds into .cache/bin from its
		// pin in tools/go.mod. Its image's entrypoint /redis_exporter runs as 59000:59000,
		// configured by flags or their variables; the operator sets the server's address
		// (redis://localhost:6379) and the listen address (:9121) in the environment. The
		// binary's own defaults for both are spelled out as the image's ENV so that a
		// container setting neither is rewritten too.
		redisExporter("*/oliver006/redis_exporter*", binDir),
		redisExporter("oliver006/redis_exporter*", binDir),
		// The Vald Helm Operator (operator-sdk's helm-operator with the Vald chart) runs as
		// distroless nonroot; the Vald chart passes `run` and controller-runtime's listeners.
		{Image: "vdaas/vald-helm-operator*", Binary: filepath.Join(binDir, "vald-helm-sim"),
			Commands: []string{"helm-operator"}, ListenFlags: []string{"--metrics-bind-address", "--health-probe-bind-address"},
			User: images.User},
	}
}

// redisExporter is the rule of one spelling of redis_exporter's image.
func redisExporter(image, binDir string) ImageRule {
	return ImageRule{Image: image, Binary: filepath.Join(filepath.Dir(binDir), ".cache", "bin", "redis_exporter"),
		Commands: []string{"redis_exporter"}, ListenFlags: []string{"--web.listen-address"},
		ListenEnv: []string{"REDIS_EXPORTER_WEB_LISTEN_ADDRESS"}, LoopbackEnv: []string{"REDIS_ADDR"},
		Env:  []string{"REDIS_ADDR=redis://localhost:6379", "REDIS_EXPORTER_WEB_LISTEN_ADDRESS=:9121"},
		User: "59000:59000"}
}

// Validate checks one rule.
func (r ImageRule) Validate() error {
	if r.Image == "" || r.Binary == "" {
		return fmt.Errorf("image rule %+v: image and binary are required", r)
	}
	if _, err := path.Match(r.Image, ""); err != nil {
		return fmt.Errorf("image rule %q: %w", r.Image, err)
	}
	if _, _, err := parseUser(r.User); err != nil {
		return fmt.Errorf("image rule %q: %w", r.Image, err)
	}
	for _, e := range r.Env {
		if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
			return fmt.Errorf("image rule %q: env %q is not NAME=value", r.Image, e)
		}
	}
	for _, c := range r.Subcommands {
		if c == "" || strings.HasPrefix(c, "-") {
			return fmt.Errorf("image rule %q: subcommand %q must be a word, not a flag", r.Image, c)
		}
	}
	for _, f := range r.ListenFlags {
		if !strings.HasPrefix(f, "-") || strings.Contains(f, "=") {
			return fmt.Errorf("image rule %q: listen flag %q must be a flag name like --listen", r.Image, f)
		}
	}
	for _, v := range append(slices.Clone(r.ListenEnv), r.LoopbackEnv...) {
		if v == "" || strings.ContainsAny(v, "= ") {
			return fmt.Errorf("image rule %q: environment variable %q must be a name like ADDR", r.Image, v)
		}
	}
	return nil
}

// NormalizeImage strips the tag, the digest and Docker Hub's implicit prefixes.
func NormalizeImage(image string) string {
	if i := strings.Index(image, "@"); i >= 0 {
		image = image[:i]
	}
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		image = image[:i]
	}
	image = strings.TrimPrefix(image, "index.docker.io/")
	image = strings.TrimPrefix(image, "docker.io/")
	return strings.TrimPrefix(image, "library/")
}

// Rules is an ordered rule set; the first matching rule wins.
type Rules []ImageRule

// Match returns the rule and the expanded binary for image.
func (rs Rules) Match(image string) (ImageRule, bool) {
	name := NormalizeImage(image)
	for _, r := range rs {
		if ok, _ := path.Match(r.Image, name); ok {
			short := path.Base(name)
			r.Binary = strings.ReplaceAll(r.Binary, "{name}", short)
			cmds := make([]string, 0, len(r.Commands)+1)
			for _, c := range r.Commands {
				cmds = append(cmds, strings.ReplaceAll(c, "{name}", short))
			}
			r.Commands = append(cmds, filepath.Base(r.Binary))
			return r, true
		}
	}
	return ImageRule{}, false
}

// Regexp returns one anchored regular expression matching every normalised image name a
// rule matches; kwok's stage selectors use it (in jq) to tell runner pods apart.
func (rs Rules) Regexp() string {
	alts := make([]string, 0, len(rs))
	for _, r := range rs {
		alts = append(alts, strings.ReplaceAll(regexp.QuoteMeta(r.Image), `\*`, `[^/]*`))
	}
	return "^(" + strings.Join(alts, "|") + ")$"
}

// JQManaged returns a jq expression that yields true for a pod with at least one container
// or init container whose image a rule matches. It normalises images like NormalizeImage.
func (rs Rules) JQManaged() string {
	re := rs.Regexp()
	norm := `sub("@.*$"; "") | sub(":[^/]*$"; "") | sub("^(index\\.)?docker\\.io/"; "") | sub("^library/"; "")`
	return fmt.Sprintf(`[(.spec.containers // [])[].image, (.spec.initContainers // [])[].image | %s | test(%q)] | any`, norm, re)
}

// argv builds the process arguments for a container: the image's executable (command[0],
// or args[0] when there is no command) is replaced by the rule's binary.
func (r ImageRule) argv(command, args []string) ([]string, error) {
	all := append(append([]string{}, command...), args...)
	if len(all) == 0 {
		return []string{r.Binary}, nil
	}
	first := all[0]
	if strings.HasPrefix(first, "-") {
		return append([]string{r.Binary}, all...), nil
	}
	for _, c := range r.Commands {
		if filepath.Base(first) == c {
			return append([]string{r.Binary}, all[1:]...), nil
		}
	}
	if len(command) == 0 {
		// Arguments to the image's entrypoint.
		return append([]string{r.Binary}, all...), nil
	}
	return nil, fmt.Errorf("command %q is not an executable the image rule %q stands in for", first, r.Image)
}

// extraArgs is ExtraArgs for the process argv (argv[0] the binary), or none when argv runs
// one of the rule's Subcommands.
func (r ImageRule) extraArgs(argv []string) []string {
	if len(argv) > 1 && slices.Contains(r.Subcommands, argv[1]) {
		return nil
	}
	return r.ExtraArgs
}

// podEnv rewrites, for a pod at podIP, the values of the rule's ListenEnv (as bindToPod
// does flags) and LoopbackEnv variables in env ("NAME=value", a new slice) and in vars.
func (r ImageRule) podEnv(env []string, vars map[string]string, podIP string) []string {
	if len(r.ListenEnv) == 0 && len(r.LoopbackEnv) == 0 {
		return env
	}
	out := make([]string, len(env))
	for i, e := range env {
		k, v, _ := strings.Cut(e, "=")
		switch {
		case slices.Contains(r.ListenEnv, k):
			v = podAddress(v, podIP)
		case slices.Contains(r.LoopbackEnv, k):
			v = loopbackToPod(v, podIP)
		}
		out[i] = k + "=" + v
		if _, ok := vars[k]; ok {
			vars[k] = v
		}
	}
	return out
}

// loopbackToPod replaces a loopback host in a URL ("redis://localhost:6379") or a
// host:port by podIP; any other value stays.
func loopbackToPod(value, podIP string) string {
	if u, err := url.Parse(value); err == nil && u.Scheme != "" && u.Host != "" {
		if !isLoopbackHost(u.Hostname()) {
			return value
		}
		host := net.JoinHostPort(podIP, u.Port())
		if u.Port() == "" {
			host = strings.TrimSuffix(host, ":")
		}
		u.Host = host
		return u.String()
	}
	if host, port, err := net.SplitHostPort(value); err == nil && isLoopbackHost(host) {
		return net.JoinHostPort(podIP, port)
	}
	return value
}

func isLoopbackHost(host string) bool {
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// parseUser reads an image USER ("uid" or "uid:gid", numeric); empty is root. The gid is
// nil when the user names none.
func parseUser(user string) (uid int64, gid *int64, err error) {
	if user == "" {
		return 0, nil, nil
	}
	u, g, hasGroup := strings.Cut(user, ":")
	uid, err = strconv.ParseInt(u, 10, 32)
	if err != nil || uid < 0 {
		return 0, nil, fmt.Errorf("user %q: want a numeric uid[:gid]", user)
	}
	if hasGroup {
		v, err := strconv.ParseInt(g, 10, 32)
		if err != nil || v < 0 {
			return 0, nil, fmt.Errorf("user %q: want a numeric uid[:gid]", user)
		}
		gid = &v
	}
	return uid, gid, nil
}

// bindToPod rewrites the values of listen flags that name no host, or a wildcard one,
// to the pod's address: "--listen=:9443" and "--listen :9443" become "<ip>:9443". Other
// values ("0" disables a listener, "127.0.0.1:8080") stay.
func bindToPod(args, flags []string, podIP string) []string {
	if len(flags) == 0 {
		return args
	}
	isFlag := func(name string) bool {
		for _, f := range flags {
			// Go's flag package takes -name and --name alike.
			if strings.TrimLeft(name, "-") == strings.TrimLeft(f, "-") {
				return true
			}
		}
		return false
	}
	out := append([]string{}, args...)
	for i := 0; i < len(out); i++ {
		a := out[i]
		if !strings.HasPrefix(a, "-") {
			continue
		}
		if name, value, ok := strings.Cut(a, "="); ok {
			if isFlag(name) {
				out[i] = name + "=" + podAddress(value, podIP)
			}
			continue
		}
		if isFlag(a) && i+1 < len(out) {
			out[i+1] = podAddress(out[i+1], podIP)
			i++
		}
	}
	return out
}

// podAddress replaces the host of a listen address when it is empty or a wildcard.
func podAddress(value, podIP string) string {
	host, port, err := net.SplitHostPort(value)
	if err != nil || port == "" {
		return value
	}
	switch host {
	case "", "0.0.0.0", "::", "*":
		return net.JoinHostPort(podIP, port)
	}
	return value
}
