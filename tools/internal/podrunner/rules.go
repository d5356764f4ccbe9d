package podrunner

import (
	"fmt"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

// ImageRule maps container images to a host binary that stands in for the image.
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
	// ExtraArgs are appended to the arguments, after $(VAR) expansion; they make an
	// image's server bind to the pod address ("--bind", "$(POD_IP)").
	ExtraArgs []string `json:"extraArgs,omitempty"`
	// WorkingDir is the image's WORKDIR, used when the container sets none.
	WorkingDir string `json:"workingDir,omitempty"`
}

// DefaultImageRules maps our images to the binaries `make build` writes to binDir and the
// Valkey and Redis images to Debian's redis-server.
func DefaultImageRules(binDir string) []ImageRule {
	redis := func(image string) ImageRule {
		return ImageRule{
			Image:      image,
			Binary:     "/usr/bin/redis-server",
			Commands:   []string{"redis-server", "valkey-server", "docker-entrypoint.sh"},
			ExtraArgs:  []string{"--bind", "$(POD_IP)"},
			WorkingDir: "/data",
		}
	}
	return []ImageRule{
		{
			Image:    "ghcr.io/opsuite/*",
			Binary:   filepath.Join(binDir, "{name}"),
			Commands: []string{"manager", "{name}"},
		},
		redis("valkey/valkey*"),
		redis("bitnami/valkey*"),
		redis("redis*"),
		redis("bitnami/redis*"),
	}
}

// Validate checks one rule.
func (r ImageRule) Validate() error {
	if r.Image == "" || r.Binary == "" {
		return fmt.Errorf("image rule %+v: image and binary are required", r)
	}
	if _, err := path.Match(r.Image, ""); err != nil {
		return fmt.Errorf("image rule %q: %w", r.Image, err)
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
