package manifest

import (
	"errors"
	"strings"
)

// The fast reader: the block-style YAML people and kubectl write, parsed in
// one pass into a flat tree of nodes whose strings are slices of the input,
// then decoded into the typed objects (decodefast.go). It is exact or it
// gives up: anything outside the subset it knows to read exactly as the
// YAML→JSON→struct path does (JSON streams, anchors, tags, folded block
// scalars, multi-line plain or quoted scalars and flows, tabs, CRLF,
// non-ASCII text, scalars that may not be strings, fields matched only
// case-insensitively, duplicate fields, any error) returns errUnsupported,
// and the file is read by the general path, which also writes the error
// messages. FuzzFastMatchesGeneral checks that whatever it reads, the
// general path reads the same.

// errUnsupported says the fast reader cannot read a file exactly.
var errUnsupported = errors.New("outside the fast YAML subset")

type ykind uint8

const (
	yNull ykind = iota
	yScalar
	yMap
	ySeq
)

// ynode is a node of the tree; a mapping's children alternate key, value.
type ynode struct {
	kind   ykind
	quoted bool   // a quoted scalar: always a string
	value  string // a scalar's text, unescaped
	first  int32  // first child, -1 when none
	next   int32  // next sibling, -1 when none
}

type yline struct {
	indent int
	text   string // after the indentation, trailing spaces removed
	num    int    // index in raw
}

type yparser struct {
	lines []yline // the lines that are not blank or comments
	raw   []string
	i     int
	nodes []ynode
	depth int
}

// maxDepth bounds the nesting the fast reader follows; deeper documents
// are the general path's.
const maxDepth = 64

// maxKey is the longest key the fast reader reads: YAML limits implicit
// keys to 1024 characters.
const maxKey = 1000

// plainASCII tells whether data holds only the characters the fast reader
// reads: printable ASCII and newlines (no tabs, no carriage returns).
func plainASCII(data []byte) bool {
	for _, c := range data {
		if (c < 0x20 && c != '\n') || c >= 0x7f {
			return false
		}
	}
	return true
}

// parse reads one document (without its separator line) into p.nodes and
// returns its root.
func (p *yparser) parse(doc string) (int32, error) {
	p.lines, p.raw = p.lines[:0], p.raw[:0]
	p.nodes = p.nodes[:0]
	p.i, p.depth = 0, 0
	first := true
	for len(doc) > 0 {
		var line string
		if j := strings.IndexByte(doc, '\n'); j >= 0 {
			line, doc = doc[:j], doc[j+1:]
		} else {
			line, doc = doc, ""
		}
		p.raw = append(p.raw, line)
		if first && strings.HasPrefix(line, "---") {
			// A start marker: the splitter leaves one only on a
			// document's first line.
			rest := strings.TrimLeft(line[3:], " ")
			if rest != "" && (rest[0] != '#' || len(rest) == len(line)-3) {
				return 0, errUnsupported
			}
			first = false
			continue
		}
		first = false
		indent := 0
		for indent < len(line) && line[indent] == ' ' {
			indent++
		}
		text := strings.TrimRight(line[indent:], " ")
		if text == "" || text[0] == '#' {
			continue
		}
		p.lines = append(p.lines, yline{indent: indent, text: text, num: len(p.raw) - 1})
	}
	root, err := p.block(-1)
	if err != nil {
		return 0, err
	}
	if p.i != len(p.lines) {
		return 0, errUnsupported
	}
	return root, nil
}

func (p *yparser) node(n ynode) int32 {
	n.first, n.next = -1, -1
	p.nodes = append(p.nodes, n)
	return int32(len(p.nodes) - 1)
}

// link appends child to parent's children; last is the parent's last child.
func (p *yparser) link(parent int32, last *int32, child int32) {
	if *last < 0 {
		p.nodes[parent].first = child
	} else {
		p.nodes[*last].next = child
	}
	*last = child
}

func isSeqEntry(text string) bool {
	return text == "-" || strings.HasPrefix(text, "- ")
}

// block reads the node on the next lines indented more than parent: a
// mapping, a sequence, or nothing (null).
func (p *yparser) block(parent int) (int32, error) {
	if p.i >= len(p.lines) || p.lines[p.i].indent <= parent {
		return p.node(ynode{kind: yNull}), nil
	}
	l := p.lines[p.i]
	if isSeqEntry(l.text) {
		return p.seq(l.indent)
	}
	return p.mapping(l.indent)
}

func (p *yparser) mapping(indent int) (int32, error) {
	if p.depth++; p.depth > maxDepth {
		return 0, errUnsupported
	}
	defer func() { p.depth-- }()
	m := p.node(ynode{kind: yMap})
	last := int32(-1)
	for p.i < len(p.lines) {
		l := p.lines[p.i]
		if l.indent < indent || l.indent == indent && isSeqEntry(l.text) {
			break
		}
		if l.indent > indent {
			return 0, errUnsupported
		}
		key, rest, ok := splitKey(l.text)
		if !ok {
			return 0, errUnsupported
		}
		k := p.node(key)
		var v int32
		var err error
		p.i++
		switch {
		case rest == "|" || rest == "|-" || strings.HasPrefix(rest, "| #") || strings.HasPrefix(rest, "|- #"):
			v, err = p.literal(l.num, indent, strings.HasPrefix(rest, "|-"))
		case rest != "":
			if v, err = p.inline(rest); err != nil {
				return 0, err
			}
			if p.i < len(p.lines) && p.lines[p.i].indent > indent {
				return 0, errUnsupported // a multi-line scalar
			}
		case p.i < len(p.lines) && p.lines[p.i].indent == indent && isSeqEntry(p.lines[p.i].text):
			v, err = p.seq(indent)
		default:
			v, err = p.block(indent)
		}
		if err != nil {
			return 0, err
		}
		p.link(m, &last, k)
		p.link(m, &last, v)
	}
	return m, nil
}

func (p *yparser) seq(indent int) (int32, error) {
	if p.depth++; p.depth > maxDepth {
		return 0, errUnsupported
	}
	defer func() { p.depth-- }()
	s := p.node(ynode{kind: ySeq})
	last := int32(-1)
	for p.i < len(p.lines) {
		l := p.lines[p.i]
		if l.indent < indent || l.indent == indent && !isSeqEntry(l.text) {
			break
		}
		if l.indent > indent {
			return 0, errUnsupported
		}
		rest := strings.TrimLeft(l.text[1:], " ")
		var v int32
		var err error
		switch {
		case rest == "" || rest[0] == '#':
			p.i++
			v, err = p.block(indent)
		case isSeqEntry(rest):
			return 0, errUnsupported
		default:
			if _, _, isKey := splitKey(rest); isKey {
				// A mapping that starts on the entry's line, indented
				// where its first key is.
				p.lines[p.i] = yline{indent: indent + len(l.text) - len(rest), text: rest, num: l.num}
				v, err = p.mapping(p.lines[p.i].indent)
				break
			}
			p.i++
			if v, err = p.inline(rest); err != nil {
				return 0, err
			}
			if p.i < len(p.lines) && p.lines[p.i].indent > indent {
				return 0, errUnsupported
			}
		}
		if err != nil {
			return 0, err
		}
		p.link(s, &last, v)
	}
	return s, nil
}

// literal reads the literal block scalar (|, or |- that strips the final
// line break) whose header ends raw line header, the value of a key indented
// by parent. Its lines are the raw ones: comments and trailing spaces in it
// are text. Leading empty lines, an empty scalar, explicit indentation, and
// keeping trailing line breaks (|+) are left to the general path.
func (p *yparser) literal(header, parent int, strip bool) (int32, error) {
	j := header + 1
	if j >= len(p.raw) {
		return 0, errUnsupported
	}
	ind := 0
	for ind < len(p.raw[j]) && p.raw[j][ind] == ' ' {
		ind++
	}
	if ind <= parent || ind == len(p.raw[j]) {
		return 0, errUnsupported
	}
	var b strings.Builder
	pending := 0 // empty lines not yet known to be inside the text
	for ; j < len(p.raw); j++ {
		line := p.raw[j]
		if len(line) > ind && strings.TrimLeft(line[:ind], " ") == "" {
			for ; pending > 0; pending-- {
				b.WriteByte('\n')
			}
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(line[ind:])
			continue
		}
		if strings.TrimLeft(line, " ") != "" {
			break
		}
		pending++
	}
	if !strip {
		b.WriteByte('\n')
	}
	for p.i < len(p.lines) && p.lines[p.i].num < j {
		p.i++
	}
	return p.node(ynode{kind: yScalar, quoted: true, value: b.String()}), nil
}

// splitKey reads "key: rest" or "key:": the key node and what follows the
// colon (comments removed); ok is false when text is not a simple key.
func splitKey(text string) (key ynode, rest string, ok bool) {
	var after string
	switch text[0] {
	case '"', '\'':
		s, n, ok := quoted(text)
		if !ok || n > maxKey {
			return ynode{}, "", false
		}
		key, after = ynode{kind: yScalar, quoted: true, value: s}, strings.TrimLeft(text[n:], " ")
		if !strings.HasPrefix(after, ":") {
			return ynode{}, "", false
		}
		after = after[1:]
	default:
		j := strings.Index(text, ": ")
		if j < 0 {
			if !strings.HasSuffix(text, ":") {
				return ynode{}, "", false
			}
			j = len(text) - 1
		}
		k := strings.TrimRight(text[:j], " ")
		if k == "" || len(k) > maxKey || !plainStart(k) || strings.Contains(k, " #") || plainKind(k) != plainString {
			return ynode{}, "", false
		}
		key, after = ynode{kind: yScalar, value: k}, text[j+1:]
	}
	if after != "" && after[0] != ' ' {
		return ynode{}, "", false
	}
	after = strings.TrimLeft(after, " ")
	if strings.HasPrefix(after, "#") {
		after = ""
	}
	return key, after, true
}

// plainStart tells whether s may start a plain scalar the fast reader reads:
// not with an indicator.
func plainStart(s string) bool {
	return !strings.ContainsRune("-?:,[]{}#&*!|>'\"%@`.", rune(s[0])) && s != "<<"
}

// inline reads a value that starts and ends on one line: a scalar or a flow
// collection, then at most a comment.
func (p *yparser) inline(text string) (int32, error) {
	var n int32
	var rest string
	switch text[0] {
	case '{', '[':
		var err error
		if n, rest, err = p.flow(text); err != nil {
			return 0, err
		}
	case '"', '\'':
		s, j, ok := quoted(text)
		if !ok {
			return 0, errUnsupported
		}
		n, rest = p.node(ynode{kind: yScalar, quoted: true, value: s}), text[j:]
	default:
		if !plainStart(text) {
			return 0, errUnsupported
		}
		v := text
		if j := strings.Index(v, " #"); j >= 0 {
			v = strings.TrimRight(v[:j], " ")
		}
		if strings.Contains(v, ": ") || strings.HasSuffix(v, ":") {
			return 0, errUnsupported
		}
		return p.plain(v)
	}
	if rest != "" && (rest[0] != ' ' || strings.TrimLeft(rest, " ")[0] != '#') {
		return 0, errUnsupported
	}
	return n, nil
}

// plain adds a plain scalar: null, or text whose type is decided where it
// is decoded (a number is fine in a field nobody reads, a float JSON cannot
// hold is not).
func (p *yparser) plain(v string) (int32, error) {
	switch plainKind(v) {
	case plainNull:
		return p.node(ynode{kind: yNull}), nil
	case plainNonFinite:
		return 0, errUnsupported
	}
	return p.node(ynode{kind: yScalar, value: v}), nil
}

// flow reads a flow mapping or sequence that closes on this line.
func (p *yparser) flow(text string) (int32, string, error) {
	if p.depth++; p.depth > maxDepth {
		return 0, "", errUnsupported
	}
	defer func() { p.depth-- }()
	open := text[0]
	kind, closing := yMap, byte('}')
	if open == '[' {
		kind, closing = ySeq, ']'
	}
	c := p.node(ynode{kind: kind})
	last := int32(-1)
	rest := strings.TrimLeft(text[1:], " ")
	if strings.HasPrefix(rest, string(closing)) {
		return c, rest[1:], nil
	}
	for {
		if kind == yMap {
			k, r, err := p.flowScalar(rest, true)
			if err != nil || p.nodes[k].kind != yScalar || !strings.HasPrefix(r, ": ") {
				return 0, "", errUnsupported
			}
			if !p.nodes[k].quoted && plainKind(p.nodes[k].value) != plainString {
				return 0, "", errUnsupported
			}
			p.link(c, &last, k)
			rest = strings.TrimLeft(r[1:], " ")
		}
		var v int32
		var err error
		if rest != "" && (rest[0] == '{' || rest[0] == '[') {
			v, rest, err = p.flow(rest)
		} else {
			v, rest, err = p.flowScalar(rest, false)
		}
		if err != nil {
			return 0, "", err
		}
		p.link(c, &last, v)
		rest = strings.TrimLeft(rest, " ")
		switch {
		case strings.HasPrefix(rest, string(closing)):
			return c, rest[1:], nil
		case strings.HasPrefix(rest, ","):
			rest = strings.TrimLeft(rest[1:], " ")
			if rest == "" || rest[0] == '}' || rest[0] == ']' {
				return 0, "", errUnsupported
			}
		default:
			return 0, "", errUnsupported
		}
	}
}

// flowScalar reads a quoted or plain scalar inside a flow collection.
func (p *yparser) flowScalar(text string, key bool) (int32, string, error) {
	if text == "" {
		return 0, "", errUnsupported
	}
	if text[0] == '"' || text[0] == '\'' {
		s, j, ok := quoted(text)
		if !ok {
			return 0, "", errUnsupported
		}
		return p.node(ynode{kind: yScalar, quoted: true, value: s}), text[j:], nil
	}
	j := strings.IndexAny(text, ",[]{}:#")
	if j < 0 || j > maxKey {
		return 0, "", errUnsupported // not closed on this line
	}
	if text[j] == '#' || text[j] == ':' && !key || text[j] == '{' || text[j] == '[' {
		return 0, "", errUnsupported
	}
	v := strings.TrimRight(text[:j], " ")
	if v == "" || !plainStart(v) {
		return 0, "", errUnsupported
	}
	n, err := p.plain(v)
	return n, text[j:], err
}

// quoted reads a single- or double-quoted scalar that closes on this line:
// its value and the length it takes in text. Double-quoted escapes other
// than \" and \\ are left to the general path.
func quoted(text string) (string, int, bool) {
	q := text[0]
	var b []byte
	escaped := false // b holds the value so far
	start := 1
	for i := 1; i < len(text); i++ {
		c := text[i]
		switch {
		case q == '\'' && c == '\'':
			if i+1 < len(text) && text[i+1] == '\'' {
				b = append(b, text[start:i+1]...)
				escaped = true
				i++
				start = i + 1
				continue
			}
		case q == '"' && c == '\\':
			if i+1 >= len(text) || (text[i+1] != '"' && text[i+1] != '\\') {
				return "", 0, false
			}
			b = append(b, text[start:i]...)
			escaped = true
			i++
			start = i
			continue
		case c != q:
			continue
		}
		if !escaped {
			return text[1:i], i + 1, true
		}
		return string(append(b, text[start:i]...)), i + 1, true
	}
	return "", 0, false
}

type plainType uint8

const (
	plainString plainType = iota
	plainNull
	plainTrue
	plainFalse
	plainUnsupported // a number, a date, or something the fast reader does not decode
	plainNonFinite   // a float JSON cannot hold
)

// plainKind says what a plain scalar resolves to under YAML 1.1 as the
// general path reads it, or plainUnsupported when the fast reader does not
// tell (a number, a timestamp, a float written .inf): it answers
// plainString only when the scalar cannot be anything else.
func plainKind(s string) plainType {
	switch s {
	case "~", "null", "Null", "NULL":
		return plainNull
	case "y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON":
		return plainTrue
	case "n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF":
		return plainFalse
	case ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF", ".nan", ".NaN", ".NAN":
		return plainNonFinite
	}
	switch c := s[0]; {
	case c == '.':
		return plainUnsupported
	case c >= '0' && c <= '9' || c == '+' || c == '-':
		// A timestamp starts with four digits and a dash.
		if len(s) >= 5 && s[4] == '-' && strings.Trim(s[:4], "0123456789") == "" {
			return plainUnsupported
		}
		// An int (any base, underscores) or a float uses only these.
		if strings.Trim(s, "0123456789abcdefABCDEFxXoO_+-.") != "" {
			return plainString
		}
		if strings.Count(s, ".") >= 2 {
			return plainString
		}
		return plainUnsupported
	}
	return plainString
}
