package scalemodel

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The simulated table evaluates DynamoDB's condition and update
// expressions as the SDK's expression builder writes them: names (#n) and
// values (:v) by reference, paths with . and [i], AND/OR/NOT, the
// comparators, BETWEEN, IN, attribute_exists, attribute_not_exists,
// begins_with, contains, size; SET (with +, -, if_not_exists,
// list_append), REMOVE, ADD and DELETE.

type item = map[string]types.AttributeValue

// env is what an expression refers to.
type env struct {
	names  map[string]string
	values map[string]types.AttributeValue
}

type lexer struct {
	toks []string
	pos  int
}

// lexed caches the tokens of each expression: the store writes a few
// dozen shapes of them, again and again.
var lexed sync.Map // string → []string

func lex(s string) *lexer {
	if toks, ok := lexed.Load(s); ok {
		return &lexer{toks: toks.([]string)}
	}
	l := tokenize(s)
	lexed.Store(s, l.toks)
	return l
}

func tokenize(s string) *lexer {
	var toks []string
	for i := 0; i < len(s); {
		c := rune(s[i])
		switch {
		case unicode.IsSpace(c):
			i++
		case strings.ContainsRune("(),.[]+-=", c):
			toks = append(toks, string(c))
			i++
		case c == '<' || c == '>':
			if i+1 < len(s) && (s[i+1] == '=' || (c == '<' && s[i+1] == '>')) {
				toks = append(toks, s[i:i+2])
				i += 2
			} else {
				toks = append(toks, string(c))
				i++
			}
		default:
			j := i + 1
			for j < len(s) && (unicode.IsLetter(rune(s[j])) || unicode.IsDigit(rune(s[j])) || s[j] == '_') {
				j++
			}
			toks = append(toks, s[i:j])
			i = j
		}
	}
	return &lexer{toks: toks}
}

func (l *lexer) peek() string {
	if l.pos < len(l.toks) {
		return l.toks[l.pos]
	}
	return ""
}

func (l *lexer) next() string { t := l.peek(); l.pos++; return t }

func (l *lexer) expect(t string) error {
	if got := l.next(); got != t {
		return fmt.Errorf("expression: want %q, got %q", t, got)
	}
	return nil
}

func keyword(t, k string) bool { return strings.EqualFold(t, k) }

// path is an attribute path: names and list indexes.
type path []any // string or int

func (l *lexer) path(e env) (path, error) {
	var p path
	for {
		t := l.next()
		name, ok := e.names[t]
		if !ok {
			if !strings.HasPrefix(t, "#") && t != "" && unicode.IsLetter(rune(t[0])) {
				name = t
			} else {
				return nil, fmt.Errorf("expression: no name %q", t)
			}
		}
		p = append(p, name)
		for l.peek() == "[" {
			l.next()
			n, err := strconv.Atoi(l.next())
			if err != nil {
				return nil, fmt.Errorf("expression: list index: %w", err)
			}
			p = append(p, n)
			if err := l.expect("]"); err != nil {
				return nil, err
			}
		}
		if l.peek() != "." {
			return p, nil
		}
		l.next()
	}
}

// get returns the value at p in it.
func get(it item, p path) (types.AttributeValue, bool) {
	var cur types.AttributeValue = &types.AttributeValueMemberM{Value: it}
	for _, step := range p {
		switch s := step.(type) {
		case string:
			m, ok := cur.(*types.AttributeValueMemberM)
			if !ok {
				return nil, false
			}
			if cur, ok = m.Value[s]; !ok {
				return nil, false
			}
		case int:
			l, ok := cur.(*types.AttributeValueMemberL)
			if !ok || s >= len(l.Value) {
				return nil, false
			}
			cur = l.Value[s]
		}
	}
	return cur, true
}

// set puts v at p in it (remove when v is nil); it and the maps and lists
// on the way are the caller's own copies.
func set(it item, p path, v types.AttributeValue) error {
	if len(p) == 1 {
		name := p[0].(string)
		if v == nil {
			delete(it, name)
		} else {
			it[name] = v
		}
		return nil
	}
	parent, ok := get(it, p[:len(p)-1])
	if !ok {
		return fmt.Errorf("expression: the document path %v does not exist", p)
	}
	switch last := p[len(p)-1].(type) {
	case string:
		m, ok := parent.(*types.AttributeValueMemberM)
		if !ok {
			return fmt.Errorf("expression: %v is not a map", p[:len(p)-1])
		}
		if v == nil {
			delete(m.Value, last)
		} else {
			m.Value[last] = v
		}
	case int:
		l, ok := parent.(*types.AttributeValueMemberL)
		if !ok {
			return fmt.Errorf("expression: %v is not a list", p[:len(p)-1])
		}
		switch {
		case v == nil && last < len(l.Value):
			l.Value = slices.Delete(l.Value, last, last+1)
		case v != nil && last < len(l.Value):
			l.Value[last] = v
		case v != nil:
			l.Value = append(l.Value, v)
		}
	}
	return nil
}

// operand reads a value operand: a path, a :value, or size(path).
func (l *lexer) operand(e env, it item) (types.AttributeValue, bool, error) {
	t := l.peek()
	switch {
	case strings.HasPrefix(t, ":"):
		l.next()
		v, ok := e.values[t]
		if !ok {
			return nil, false, fmt.Errorf("expression: no value %q", t)
		}
		return v, true, nil
	case keyword(t, "size"):
		l.next()
		if err := l.expect("("); err != nil {
			return nil, false, err
		}
		p, err := l.path(e)
		if err != nil {
			return nil, false, err
		}
		if err := l.expect(")"); err != nil {
			return nil, false, err
		}
		v, ok := get(it, p)
		if !ok {
			return nil, false, nil
		}
		return &types.AttributeValueMemberN{Value: strconv.Itoa(sizeOf(v))}, true, nil
	}
	p, err := l.path(e)
	if err != nil {
		return nil, false, err
	}
	v, ok := get(it, p)
	return v, ok, nil
}

func sizeOf(v types.AttributeValue) int {
	switch x := v.(type) {
	case *types.AttributeValueMemberS:
		return len(x.Value)
	case *types.AttributeValueMemberB:
		return len(x.Value)
	case *types.AttributeValueMemberSS:
		return len(x.Value)
	case *types.AttributeValueMemberNS:
		return len(x.Value)
	case *types.AttributeValueMemberBS:
		return len(x.Value)
	case *types.AttributeValueMemberL:
		return len(x.Value)
	case *types.AttributeValueMemberM:
		return len(x.Value)
	}
	return 0
}

// compare orders two values of one scalar type: ok is false when they
// cannot be ordered.
func compare(a, b types.AttributeValue) (int, bool) {
	switch x := a.(type) {
	case *types.AttributeValueMemberN:
		y, ok := b.(*types.AttributeValueMemberN)
		if !ok {
			return 0, false
		}
		fa, e1 := strconv.ParseFloat(x.Value, 64)
		fb, e2 := strconv.ParseFloat(y.Value, 64)
		if e1 != nil || e2 != nil {
			return 0, false
		}
		switch {
		case fa < fb:
			return -1, true
		case fa > fb:
			return 1, true
		}
		return 0, true
	case *types.AttributeValueMemberS:
		y, ok := b.(*types.AttributeValueMemberS)
		if !ok {
			return 0, false
		}
		return strings.Compare(x.Value, y.Value), true
	case *types.AttributeValueMemberB:
		y, ok := b.(*types.AttributeValueMemberB)
		if !ok {
			return 0, false
		}
		return bytes.Compare(x.Value, y.Value), true
	}
	return 0, false
}

func equal(a, b types.AttributeValue) bool {
	if c, ok := compare(a, b); ok {
		return c == 0
	}
	switch x := a.(type) {
	case *types.AttributeValueMemberSS:
		y, ok := b.(*types.AttributeValueMemberSS)
		return ok && slices.Equal(slices.Sorted(slices.Values(x.Value)), slices.Sorted(slices.Values(y.Value)))
	case *types.AttributeValueMemberBOOL:
		y, ok := b.(*types.AttributeValueMemberBOOL)
		return ok && x.Value == y.Value
	case *types.AttributeValueMemberNULL:
		_, ok := b.(*types.AttributeValueMemberNULL)
		return ok
	case *types.AttributeValueMemberL:
		y, ok := b.(*types.AttributeValueMemberL)
		return ok && slices.EqualFunc(x.Value, y.Value, equal)
	case *types.AttributeValueMemberM:
		y, ok := b.(*types.AttributeValueMemberM)
		return ok && maps.EqualFunc(x.Value, y.Value, equal)
	}
	return false
}
