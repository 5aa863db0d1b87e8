package scalemodel

import (
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

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
