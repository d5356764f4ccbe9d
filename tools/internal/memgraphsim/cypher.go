package memgraphsim

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// Kind is what a query asks for; the simulator understands a fixed set of query shapes.
type Kind int

// The query shapes the simulator understands.
const (
	KindAddCoordinator Kind = iota + 1
	KindRemoveCoordinator
	KindRegisterInstance
	KindUnregisterInstance
	KindSetMain
	KindDemote
	KindSetCoordinatorSetting
	KindUpdateConfig
	KindYieldLeadership
	KindShowInstances
	KindShowInstance
	KindShowCoordinatorSettings
	KindShowReplicationLag
	KindShowReplicationRole
	KindShowReplicas
	KindShowStorageInfo
	KindCreate
	KindCount
	KindMatchReturn
	KindReturnLiteral
	KindCountEdges
	KindCreateSnapshot
	KindShowSnapshots
	KindLockDataDirectory
	KindUnlockDataDirectory
	KindDataDirectoryLockStatus
	KindShowVersion
)

// Command is one parsed query.
type Command struct {
	Kind Kind
	// ID is the coordinator id of ADD/REMOVE COORDINATOR and UPDATE CONFIG FOR
	// COORDINATOR.
	ID int
	// Name is the instance of REGISTER/UNREGISTER/SET ... TO MAIN/DEMOTE and UPDATE
	// CONFIG FOR INSTANCE ("" in UPDATE CONFIG FOR COORDINATOR).
	Name string
	// Mode is REGISTER INSTANCE's replication mode: "sync", "async" or "strict_sync".
	Mode string
	// Setting and SettingValue are SET COORDINATOR SETTING's name and value.
	Setting, SettingValue string
	// Config is the WITH CONFIG map.
	Config map[string]string
	// Nodes are CREATE's node patterns.
	Nodes []NodePattern
	// Edges are CREATE's relationships between its nodes.
	Edges []EdgePattern
	// Label filters MATCH; empty matches every node.
	Label string
	// Column is the returned column's name.
	Column string
	// Value is RETURN's literal.
	Value any
}

// NodePattern is one "(:Label {k: v})" of CREATE.
type NodePattern struct {
	Labels []string
	Props  map[string]any
}

// IsCoordinatorQuery says whether the query belongs to the coordinators' HA vocabulary.
func (c Command) IsCoordinatorQuery() bool { return c.Kind <= KindShowReplicationLag }

// IsMutation says whether a coordinator query changes the cluster (and so runs on the
// leader).
func (c Command) IsMutation() bool { return c.Kind <= KindYieldLeadership }

// Verb is the command's name in error messages.
func (c Command) Verb() string {
	return map[Kind]string{
		KindAddCoordinator: "ADD COORDINATOR", KindRemoveCoordinator: "REMOVE COORDINATOR",
		KindRegisterInstance: "REGISTER INSTANCE", KindUnregisterInstance: "UNREGISTER INSTANCE",
		KindSetMain: "SET INSTANCE TO MAIN", KindDemote: "DEMOTE INSTANCE", KindYieldLeadership: "YIELD LEADERSHIP",
		KindSetCoordinatorSetting: "SET COORDINATOR SETTING", KindUpdateConfig: "UPDATE CONFIG", KindShowCoordinatorSettings: "SHOW COORDINATOR SETTINGS",
		KindShowInstances: "SHOW INSTANCES", KindShowInstance: "SHOW INSTANCE", KindShowReplicationLag: "SHOW REPLICATION LAG",
		KindShowReplicationRole: "SHOW REPLICATION ROLE", KindShowReplicas: "SHOW REPLICAS", KindShowStorageInfo: "SHOW STORAGE INFO",
		KindCreate: "CREATE", KindCount: "MATCH", KindMatchReturn: "MATCH", KindReturnLiteral: "RETURN", KindCountEdges: "MATCH",
		KindCreateSnapshot: "CREATE SNAPSHOT", KindShowSnapshots: "SHOW SNAPSHOTS", KindLockDataDirectory: "LOCK DATA DIRECTORY",
		KindUnlockDataDirectory: "UNLOCK DATA DIRECTORY", KindDataDirectoryLockStatus: "DATA DIRECTORY LOCK STATUS", KindShowVersion: "SHOW VERSION",
	}[c.Kind]
}

// token is one lexical element; kind is 'i' identifier, 's' string, 'n' number, 'p'
// parameter, or the punctuation character itself.
type token struct {
	kind byte
	text string
}

func lex(q string) ([]token, error) {
	var toks []token
	r := []rune(q)
	for i := 0; i < len(r); {
		c := r[i]
		switch {
		case unicode.IsSpace(c):
			i++
		case c == '/' && i+1 < len(r) && r[i+1] == '/':
			for i < len(r) && r[i] != '\n' {
				i++
			}
		case unicode.IsLetter(c) || c == '_':
			j := i
			for j < len(r) && (unicode.IsLetter(r[j]) || unicode.IsDigit(r[j]) || r[j] == '_') {
				j++
			}
			toks = append(toks, token{'i', string(r[i:j])})
			i = j
		case c == '`':
			j := i + 1
			for j < len(r) && r[j] != '`' {
				j++
			}
			if j >= len(r) {
				return nil, fmt.Errorf("unterminated quoted name")
			}
			toks = append(toks, token{'i', string(r[i+1 : j])})
			i = j + 1
		case unicode.IsDigit(c) || (c == '-' && i+1 < len(r) && unicode.IsDigit(r[i+1])):
			j := i + 1
			for j < len(r) && (unicode.IsDigit(r[j]) || r[j] == '.' || r[j] == 'e' || r[j] == 'E') {
				j++
			}
			toks = append(toks, token{'n', string(r[i:j])})
			i = j
		case c == '"' || c == '\'':
			var sb strings.Builder
			j := i + 1
			for ; j < len(r) && r[j] != c; j++ {
				if r[j] == '\\' && j+1 < len(r) {
					j++
					switch r[j] {
					case 'n':
						sb.WriteRune('\n')
					case 't':
						sb.WriteRune('\t')
					default:
						sb.WriteRune(r[j])
					}
					continue
				}
				sb.WriteRune(r[j])
			}
			if j >= len(r) {
				return nil, fmt.Errorf("unterminated string")
			}
			toks = append(toks, token{'s', sb.String()})
			i = j + 1
		case c == '$':
			j := i + 1
			for j < len(r) && (unicode.IsLetter(r[j]) || unicode.IsDigit(r[j]) || r[j] == '_') {
				j++
			}
			toks = append(toks, token{'p', string(r[i+1 : j])})
			i = j
		case strings.ContainsRune("(){}[]:,;.*-><", c):
			toks = append(toks, token{byte(c), string(c)})
			i++
		default:
			return nil, fmt.Errorf("unexpected character %q", c)
		}
	}
	for len(toks) > 0 && toks[len(toks)-1].kind == ';' {
		toks = toks[:len(toks)-1]
	}
	return toks, nil
}

type parser struct {
	toks   []token
	pos    int
	params map[string]any
}

func (p *parser) peek() token {
	if p.pos < len(p.toks) {
		return p.toks[p.pos]
	}
	return token{}
}

func (p *parser) next() token { t := p.peek(); p.pos++; return t }

// kw consumes the keywords in order (case-insensitive) or consumes nothing.
func (p *parser) kw(words ...string) bool {
	for i, w := range words {
		if p.pos+i >= len(p.toks) {
			return false
		}
		t := p.toks[p.pos+i]
		if t.kind != 'i' || !strings.EqualFold(t.text, w) {
			return false
		}
	}
	p.pos += len(words)
	return true
}

func (p *parser) expect(kind byte) (token, error) {
	t := p.next()
	if t.kind != kind {
		return t, fmt.Errorf("expected %q, found %q", string(kind), t.text)
	}
	return t, nil
}

func (p *parser) done() error {
	if p.pos < len(p.toks) {
		return fmt.Errorf("unexpected %q", p.toks[p.pos].text)
	}
	return nil
}

// name reads an identifier or a string used as a name.
func (p *parser) name() (string, error) {
	t := p.next()
	if t.kind != 'i' && t.kind != 's' {
		return "", fmt.Errorf("expected a name, found %q", t.text)
	}
	return t.text, nil
}

func (p *parser) value() (any, error) {
	t := p.next()
	switch t.kind {
	case 's':
		return t.text, nil
	case 'n':
		if i, err := strconv.ParseInt(t.text, 10, 64); err == nil {
			return i, nil
		}
		f, err := strconv.ParseFloat(t.text, 64)
		if err != nil {
			return nil, fmt.Errorf("bad number %q", t.text)
		}
		return f, nil
	case 'p':
		v, ok := p.params[t.text]
		if !ok {
			return nil, fmt.Errorf("parameter $%s not provided", t.text)
		}
		return normalizeValue(v), nil
	case 'i':
		switch strings.ToLower(t.text) {
		case "true":
			return true, nil
		case "false":
			return false, nil
		case "null":
			return nil, nil
		}
	case '[':
		var list []any
		for p.peek().kind != ']' {
			v, err := p.value()
			if err != nil {
				return nil, err
			}
			list = append(list, v)
			if p.peek().kind == ',' {
				p.next()
			}
		}
		p.next()
		return list, nil
	}
	return nil, fmt.Errorf("unsupported value %q", t.text)
}

func (p *parser) mapLiteral() (map[string]any, error) {
	if _, err := p.expect('{'); err != nil {
		return nil, err
	}
	m := map[string]any{}
	for p.peek().kind != '}' {
		k, err := p.name()
		if err != nil {
			return nil, err
		}
		if _, err := p.expect(':'); err != nil {
			return nil, err
		}
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		m[k] = v
		if p.peek().kind == ',' {
			p.next()
		} else if p.peek().kind != '}' {
			return nil, fmt.Errorf("expected ',' or '}' in map, found %q", p.peek().text)
		}
	}
	p.next()
	return m, nil
}

func (p *parser) config() (map[string]string, error) {
	if !p.kw("WITH", "CONFIG") {
		return nil, fmt.Errorf("expected WITH CONFIG")
	}
	return p.stringMap()
}

// stringMap reads a map literal whose values are all strings.
func (p *parser) stringMap() (map[string]string, error) {
	m, err := p.mapLiteral()
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for k, v := range m {
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("config value of %q must be a string", k)
		}
		out[k] = s
	}
	return out, nil
}

// nodePattern reads "(var:Label:Other {k: v})" and returns the variable too.
func (p *parser) nodePattern() (string, NodePattern, error) {
	var n NodePattern
	var variable string
	if _, err := p.expect('('); err != nil {
		return "", n, err
	}
	if p.peek().kind == 'i' {
		variable = p.next().text
	}
	for p.peek().kind == ':' {
		p.next()
		l, err := p.name()
		if err != nil {
			return "", n, err
		}
		n.Labels = append(n.Labels, l)
	}
	if p.peek().kind == '{' {
		m, err := p.mapLiteral()
		if err != nil {
			return "", n, err
		}
		n.Props = m
	}
	_, err := p.expect(')')
	return variable, n, err
}

// ParseQuery parses the query shapes the simulator understands; anything else is an error
// naming the first token it could not take.
func ParseQuery(text string, params map[string]any) (Command, error) {
	toks, err := lex(text)
	if err != nil {
		return Command{}, err
	}
	p := &parser{toks: toks, params: params}
	c, err := p.command()
	if err != nil {
		return Command{}, err
	}
	return c, p.done()
}

func (p *parser) command() (Command, error) {
	switch {
	case p.kw("ADD", "COORDINATOR"):
		c := Command{Kind: KindAddCoordinator}
		id, err := p.intValue()
		if err != nil {
			return c, err
		}
		c.ID = id
		c.Config, err = p.config()
		return c, err
	case p.kw("REMOVE", "COORDINATOR"):
		id, err := p.intValue()
		return Command{Kind: KindRemoveCoordinator, ID: id}, err
	case p.kw("REGISTER", "INSTANCE"):
		c := Command{Kind: KindRegisterInstance, Mode: "sync"}
		var err error
		if c.Name, err = p.name(); err != nil {
			return c, err
		}
		switch {
		case p.kw("AS", "ASYNC"):
			c.Mode = "async"
		case p.kw("AS", "STRICT_SYNC"):
			c.Mode = "strict_sync"
		case p.kw("AS", "SYNC"):
		}
		c.Config, err = p.config()
		return c, err
	case p.kw("UPDATE", "CONFIG", "FOR", "INSTANCE"):
		// UPDATE CONFIG FOR INSTANCE <name> {"bolt_server": ...}: no WITH CONFIG here.
		c := Command{Kind: KindUpdateConfig}
		var err error
		if c.Name, err = p.name(); err != nil {
			return c, err
		}
		c.Config, err = p.stringMap()
		return c, err
	case p.kw("UPDATE", "CONFIG", "FOR", "COORDINATOR"):
		c := Command{Kind: KindUpdateConfig}
		id, err := p.intValue()
		if err != nil {
			return c, err
		}
		c.ID = id
		c.Config, err = p.stringMap()
		return c, err
	case p.kw("UNREGISTER", "INSTANCE"):
		n, err := p.name()
		return Command{Kind: KindUnregisterInstance, Name: n}, err
	case p.kw("SET", "COORDINATOR", "SETTING"):
		// Memgraph takes both as string literals.
		c := Command{Kind: KindSetCoordinatorSetting}
		name, value := p.next(), token{}
		if name.kind != 's' {
			return c, fmt.Errorf("Setting name should be a string literal") //nolint:staticcheck // Memgraph's text

		}
		if p.kw("TO") {
			value = p.next()
		}
		if value.kind != 's' {
			return c, fmt.Errorf("Setting value should be a string literal") //nolint:staticcheck // Memgraph's text

		}
		c.Setting, c.SettingValue = name.text, value.text
		return c, nil
	case p.kw("SHOW", "COORDINATOR", "SETTINGS"):
		return Command{Kind: KindShowCoordinatorSettings}, nil
	case p.kw("SET", "INSTANCE"):
		n, err := p.name()
		if err == nil && !p.kw("TO", "MAIN") {
			err = fmt.Errorf("expected TO MAIN")
		}
		return Command{Kind: KindSetMain, Name: n}, err
	case p.kw("DEMOTE", "INSTANCE"):
		n, err := p.name()
		return Command{Kind: KindDemote, Name: n}, err
	case p.kw("YIELD", "LEADERSHIP"):
		return Command{Kind: KindYieldLeadership}, nil
	case p.kw("SHOW", "INSTANCES"):
		return Command{Kind: KindShowInstances}, nil
	case p.kw("SHOW", "INSTANCE"):
		return Command{Kind: KindShowInstance}, nil
	case p.kw("SHOW", "REPLICATION", "LAG"):
		return Command{Kind: KindShowReplicationLag}, nil
	case p.kw("SHOW", "REPLICATION", "ROLE"):
		return Command{Kind: KindShowReplicationRole}, nil
	case p.kw("SHOW", "REPLICAS"):
		return Command{Kind: KindShowReplicas}, nil
	case p.kw("SHOW", "STORAGE", "INFO"):
		return Command{Kind: KindShowStorageInfo}, nil
	case p.kw("CREATE", "SNAPSHOT"):
		return Command{Kind: KindCreateSnapshot}, nil
	case p.kw("SHOW", "SNAPSHOTS"):
		return Command{Kind: KindShowSnapshots}, nil
	case p.kw("LOCK", "DATA", "DIRECTORY"):
		return Command{Kind: KindLockDataDirectory}, nil
	case p.kw("UNLOCK", "DATA", "DIRECTORY"):
		return Command{Kind: KindUnlockDataDirectory}, nil
	case p.kw("DATA", "DIRECTORY", "LOCK", "STATUS"):
		return Command{Kind: KindDataDirectoryLockStatus}, nil
	case p.kw("SHOW", "VERSION"):
		return Command{Kind: KindShowVersion}, nil
	case p.kw("CREATE"):
		return p.create()
	case p.kw("MATCH"):
		return p.match()
	case p.kw("RETURN"):
		v, err := p.value()
		if err != nil {
			return Command{}, err
		}
		c := Command{Kind: KindReturnLiteral, Value: v, Column: fmt.Sprint(v)}
		if p.kw("AS") {
			c.Column, err = p.name()
		}
		return c, err
	}
	return Command{}, fmt.Errorf("unsupported query starting at %q", p.peek().text)
}

// create reads "CREATE <path>, <path>, ..." where a path is a node pattern, optionally
// followed by "-[:TYPE {k: v}]->(node)" steps; a bare "(a)" names a node created earlier
// in the same CREATE.
func (p *parser) create() (Command, error) {
	c := Command{Kind: KindCreate}
	vars := map[string]int{}
	node := func() (int, error) {
		v, n, err := p.nodePattern()
		if err != nil {
			return 0, err
		}
		if i, ok := vars[v]; ok && v != "" {
			if len(n.Labels) > 0 || len(n.Props) > 0 {
				return 0, fmt.Errorf("variable %q is already declared", v)
			}
			return i, nil
		}
		c.Nodes = append(c.Nodes, n)
		if v != "" {
			vars[v] = len(c.Nodes) - 1
		}
		return len(c.Nodes) - 1, nil
	}
	for {
		from, err := node()
		if err != nil {
			return c, err
		}
		for p.peek().kind == '-' {
			p.next()
			e, err := p.relPattern()
			if err != nil {
				return c, err
			}
			if e.Type == "" {
				return c, fmt.Errorf("a relationship created needs exactly one type")
			}
			if _, err := p.expect('-'); err != nil {
				return c, err
			}
			if _, err := p.expect('>'); err != nil {
				return c, fmt.Errorf("only directed relationships (->) are supported")
			}
			to, err := node()
			if err != nil {
				return c, err
			}
			e.From, e.To = from, to
			c.Edges = append(c.Edges, e)
			from = to
		}
		if p.peek().kind != ',' {
			return c, nil
		}
		p.next()
	}
}

// relPattern reads "[r:TYPE {k: v}]" (variable, type and properties optional).
func (p *parser) relPattern() (EdgePattern, error) {
	var e EdgePattern
	if _, err := p.expect('['); err != nil {
		return e, err
	}
	if p.peek().kind == 'i' {
		p.next()
	}
	if p.peek().kind == ':' {
		p.next()
		t, err := p.name()
		if err != nil {
			return e, err
		}
		e.Type = t
	}
	if p.peek().kind == '{' {
		m, err := p.mapLiteral()
		if err != nil {
			return e, err
		}
		e.Props = m
	}
	_, err := p.expect(']')
	return e, err
}

func (p *parser) intValue() (int, error) {
	v, err := p.value()
	if err != nil {
		return 0, err
	}
	i, ok := v.(int64)
	if !ok {
		return 0, fmt.Errorf("expected an integer id, found %v", v)
	}
	return int(i), nil
}

// match reads "MATCH (n[:Label]) RETURN count(n) [AS c]" or "... RETURN n".
func (p *parser) match() (Command, error) {
	variable, n, err := p.nodePattern()
	if err != nil {
		return Command{}, err
	}
	if p.peek().kind == '-' {
		return p.matchEdges(n)
	}
	if len(n.Labels) > 1 || len(n.Props) > 0 {
		return Command{}, fmt.Errorf("MATCH supports one label and no property filter")
	}
	c := Command{Kind: KindMatchReturn, Column: variable}
	if len(n.Labels) == 1 {
		c.Label = n.Labels[0]
	}
	if !p.kw("RETURN") {
		return c, fmt.Errorf("expected RETURN")
	}
	if p.kw("count") {
		c.Kind = KindCount
		if _, err := p.expect('('); err != nil {
			return c, err
		}
		arg := p.next()
		if arg.kind != '*' && (arg.kind != 'i' || arg.text != variable) {
			return c, fmt.Errorf("count(%s) does not name the matched node", arg.text)
		}
		if _, err := p.expect(')'); err != nil {
			return c, err
		}
		c.Column = "count(" + arg.text + ")"
	} else {
		t := p.next()
		if t.kind != 'i' || t.text != variable || variable == "" {
			return c, fmt.Errorf("RETURN must name the matched node")
		}
	}
	if p.kw("AS") {
		c.Column, err = p.name()
	}
	return c, err
}

// matchEdges reads the rest of "MATCH ()-[r[:TYPE]]->() RETURN count(r) [AS c]": edges
// are counted only, by type, with no filter on their ends.
func (p *parser) matchEdges(from NodePattern) (Command, error) {
	p.next()
	if len(from.Labels) > 0 || len(from.Props) > 0 {
		return Command{}, fmt.Errorf("MATCH on relationships supports no node filter")
	}
	if _, err := p.expect('['); err != nil {
		return Command{}, err
	}
	variable := ""
	if p.peek().kind == 'i' {
		variable = p.next().text
	}
	c := Command{Kind: KindCountEdges}
	if p.peek().kind == ':' {
		p.next()
		t, err := p.name()
		if err != nil {
			return c, err
		}
		c.Label = t
	}
	for _, k := range []byte{']', '-', '>'} {
		if _, err := p.expect(k); err != nil {
			return c, err
		}
	}
	_, to, err := p.nodePattern()
	if err != nil {
		return c, err
	}
	if len(to.Labels) > 0 || len(to.Props) > 0 {
		return c, fmt.Errorf("MATCH on relationships supports no node filter")
	}
	if !p.kw("RETURN") || !p.kw("count") {
		return c, fmt.Errorf("MATCH on relationships supports RETURN count(r) only")
	}
	if _, err := p.expect('('); err != nil {
		return c, err
	}
	arg := p.next()
	if arg.kind != '*' && (arg.kind != 'i' || arg.text != variable) {
		return c, fmt.Errorf("count(%s) does not name the matched relationship", arg.text)
	}
	if _, err := p.expect(')'); err != nil {
		return c, err
	}
	c.Column = "count(" + arg.text + ")"
	if p.kw("AS") {
		c.Column, err = p.name()
	}
	return c, err
}

// normalizeValue maps Go values a client sends as parameters onto the store's value set.
func normalizeValue(v any) any {
	switch x := v.(type) {
	case int:
		return int64(x)
	case int8:
		return int64(x)
	case int16:
		return int64(x)
	case int32:
		return int64(x)
	case uint8:
		return int64(x)
	case uint16:
		return int64(x)
	case uint32:
		return int64(x)
	case float32:
		return float64(x)
	case []any:
		out := make([]any, len(x))
		for i := range x {
			out[i] = normalizeValue(x[i])
		}
		return out
	}
	return v
}
