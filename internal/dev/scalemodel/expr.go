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

// condition evaluates a condition expression against it (nil: no item).
func condition(expr string, e env, it item) (bool, error) {
	if expr == "" {
		return true, nil
	}
	l := lex(expr)
	ok, err := l.or(e, it)
	if err == nil && l.peek() != "" {
		err = fmt.Errorf("expression: trailing %q", l.peek())
	}
	return ok, err
}

func (l *lexer) or(e env, it item) (bool, error) {
	v, err := l.and(e, it)
	for err == nil && keyword(l.peek(), "OR") {
		l.next()
		var w bool
		w, err = l.and(e, it)
		v = v || w
	}
	return v, err
}

func (l *lexer) and(e env, it item) (bool, error) {
	v, err := l.not(e, it)
	for err == nil && keyword(l.peek(), "AND") {
		l.next()
		var w bool
		w, err = l.not(e, it)
		v = v && w
	}
	return v, err
}

func (l *lexer) not(e env, it item) (bool, error) {
	if keyword(l.peek(), "NOT") {
		l.next()
		v, err := l.not(e, it)
		return !v, err
	}
	return l.primary(e, it)
}

func (l *lexer) primary(e env, it item) (bool, error) {
	t := l.peek()
	if t == "(" {
		l.next()
		v, err := l.or(e, it)
		if err != nil {
			return false, err
		}
		return v, l.expect(")")
	}
	switch strings.ToLower(t) {
	case "attribute_exists", "attribute_not_exists", "begins_with", "contains", "attribute_type":
		l.next()
		if err := l.expect("("); err != nil {
			return false, err
		}
		p, err := l.path(e)
		if err != nil {
			return false, err
		}
		v, has := get(it, p)
		var arg types.AttributeValue
		if l.peek() == "," {
			l.next()
			if arg, _, err = l.operand(e, it); err != nil {
				return false, err
			}
		}
		if err := l.expect(")"); err != nil {
			return false, err
		}
		switch strings.ToLower(t) {
		case "attribute_exists":
			return has, nil
		case "attribute_not_exists":
			return !has, nil
		case "begins_with":
			s, ok1 := v.(*types.AttributeValueMemberS)
			pre, ok2 := arg.(*types.AttributeValueMemberS)
			return has && ok1 && ok2 && strings.HasPrefix(s.Value, pre.Value), nil
		case "contains":
			return has && contains(v, arg), nil
		}
		return false, fmt.Errorf("expression: %s is not simulated", t)
	}
	a, hasA, err := l.operand(e, it)
	if err != nil {
		return false, err
	}
	op := strings.ToUpper(l.next())
	switch op {
	case "BETWEEN":
		lo, _, err := l.operand(e, it)
		if err != nil {
			return false, err
		}
		if !keyword(l.next(), "AND") {
			return false, fmt.Errorf("expression: BETWEEN without AND")
		}
		hi, _, err := l.operand(e, it)
		if err != nil || !hasA {
			return false, err
		}
		c1, ok1 := compare(a, lo)
		c2, ok2 := compare(a, hi)
		return ok1 && ok2 && c1 >= 0 && c2 <= 0, nil
	case "IN":
		if err := l.expect("("); err != nil {
			return false, err
		}
		found := false
		for {
			b, _, err := l.operand(e, it)
			if err != nil {
				return false, err
			}
			found = found || (hasA && equal(a, b))
			if l.peek() != "," {
				break
			}
			l.next()
		}
		return found, l.expect(")")
	}
	b, hasB, err := l.operand(e, it)
	if err != nil {
		return false, err
	}
	if !hasA || !hasB {
		return op == "<>" && hasA != hasB, nil
	}
	switch op {
	case "=":
		return equal(a, b), nil
	case "<>":
		return !equal(a, b), nil
	}
	c, ok := compare(a, b)
	if !ok {
		return false, nil
	}
	switch op {
	case "<":
		return c < 0, nil
	case "<=":
		return c <= 0, nil
	case ">":
		return c > 0, nil
	case ">=":
		return c >= 0, nil
	}
	return false, fmt.Errorf("expression: comparator %q", op)
}

func contains(v, arg types.AttributeValue) bool {
	switch x := v.(type) {
	case *types.AttributeValueMemberS:
		s, ok := arg.(*types.AttributeValueMemberS)
		return ok && strings.Contains(x.Value, s.Value)
	case *types.AttributeValueMemberSS:
		s, ok := arg.(*types.AttributeValueMemberS)
		return ok && slices.Contains(x.Value, s.Value)
	case *types.AttributeValueMemberNS:
		n, ok := arg.(*types.AttributeValueMemberN)
		return ok && slices.ContainsFunc(x.Value, func(s string) bool { return equal(&types.AttributeValueMemberN{Value: s}, n) })
	case *types.AttributeValueMemberL:
		return slices.ContainsFunc(x.Value, func(e types.AttributeValue) bool { return equal(e, arg) })
	}
	return false
}
