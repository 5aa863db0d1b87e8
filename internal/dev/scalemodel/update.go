package scalemodel

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// update applies an update expression to it, which the caller owns (a
// deep copy of the stored item, or a new one holding the key).
func update(expr string, e env, it item) error {
	l := lex(expr)
	for l.peek() != "" {
		clause := strings.ToUpper(l.next())
		for {
			p, err := l.path(e)
			if err != nil {
				return err
			}
			switch clause {
			case "SET":
				if err := l.expect("="); err != nil {
					return err
				}
				v, err := l.setValue(e, it)
				if err != nil {
					return err
				}
				if err := set(it, p, v); err != nil {
					return err
				}
			case "REMOVE":
				if err := set(it, p, nil); err != nil {
					return err
				}
			case "ADD", "DELETE":
				arg, _, err := l.operand(e, it)
				if err != nil {
					return err
				}
				old, has := get(it, p)
				v, err := addOrDelete(clause == "ADD", old, has, arg)
				if err != nil {
					return err
				}
				if err := set(it, p, v); err != nil {
					return err
				}
			default:
				return fmt.Errorf("expression: clause %q", clause)
			}
			if l.peek() != "," {
				break
			}
			l.next()
		}
	}
	return nil
}

// setValue reads the value of a SET action: an operand, if_not_exists,
// list_append, or a sum or difference of two of those.
func (l *lexer) setValue(e env, it item) (types.AttributeValue, error) {
	a, err := l.setTerm(e, it)
	if err != nil {
		return nil, err
	}
	if op := l.peek(); op == "+" || op == "-" {
		l.next()
		b, err := l.setTerm(e, it)
		if err != nil {
			return nil, err
		}
		x, ok1 := a.(*types.AttributeValueMemberN)
		y, ok2 := b.(*types.AttributeValueMemberN)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("expression: %s of non-numbers", op)
		}
		fa, _ := strconv.ParseFloat(x.Value, 64)
		fb, _ := strconv.ParseFloat(y.Value, 64)
		if op == "-" {
			fb = -fb
		}
		return &types.AttributeValueMemberN{Value: strconv.FormatFloat(fa+fb, 'f', -1, 64)}, nil
	}
	return a, nil
}

func (l *lexer) setTerm(e env, it item) (types.AttributeValue, error) {
	switch t := strings.ToLower(l.peek()); t {
	case "if_not_exists", "list_append":
		l.next()
		if err := l.expect("("); err != nil {
			return nil, err
		}
		a, err := l.setTerm(e, it)
		if err != nil && t != "if_not_exists" {
			return nil, err
		}
		if err := l.expect(","); err != nil {
			return nil, err
		}
		b, err := l.setTerm(e, it)
		if err != nil {
			return nil, err
		}
		if err := l.expect(")"); err != nil {
			return nil, err
		}
		if t == "if_not_exists" {
			if a != nil {
				return a, nil
			}
			return b, nil
		}
		x, ok1 := a.(*types.AttributeValueMemberL)
		y, ok2 := b.(*types.AttributeValueMemberL)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("expression: list_append of non-lists")
		}
		return &types.AttributeValueMemberL{Value: append(slices.Clone(x.Value), y.Value...)}, nil
	}
	v, has, err := l.operand(e, it)
	if err != nil {
		return nil, err
	}
	if !has {
		return nil, fmt.Errorf("expression: the operand does not exist")
	}
	return v, nil
}

// addOrDelete is ADD (add) or DELETE of arg to old: a number added, a set's
// elements added or taken away (an emptied set is removed: nil).
func addOrDelete(add bool, old types.AttributeValue, has bool, arg types.AttributeValue) (types.AttributeValue, error) {
	switch a := arg.(type) {
	case *types.AttributeValueMemberN:
		if !add {
			return nil, fmt.Errorf("expression: DELETE of a number")
		}
		if !has {
			return a, nil
		}
		o, ok := old.(*types.AttributeValueMemberN)
		if !ok {
			return nil, fmt.Errorf("expression: ADD of a number to a non-number")
		}
		fa, _ := strconv.ParseFloat(o.Value, 64)
		fb, _ := strconv.ParseFloat(a.Value, 64)
		return &types.AttributeValueMemberN{Value: strconv.FormatFloat(fa+fb, 'f', -1, 64)}, nil
	case *types.AttributeValueMemberSS:
		var cur []string
		if has {
			o, ok := old.(*types.AttributeValueMemberSS)
			if !ok {
				return nil, fmt.Errorf("expression: a string set and another type")
			}
			cur = o.Value
		}
		set := map[string]bool{}
		for _, s := range cur {
			set[s] = true
		}
		for _, s := range a.Value {
			set[s] = add
		}
		var out []string
		for s, in := range set {
			if in {
				out = append(out, s)
			}
		}
		if len(out) == 0 {
			return nil, nil
		}
		slices.Sort(out)
		return &types.AttributeValueMemberSS{Value: out}, nil
	}
	return nil, fmt.Errorf("expression: ADD or DELETE of %T is not simulated", arg)
}

// clone deeply copies it.
func clone(it item) item {
	if it == nil {
		return nil
	}
	out := make(item, len(it))
	for k, v := range it {
		out[k] = cloneValue(v)
	}
	return out
}

func cloneValue(v types.AttributeValue) types.AttributeValue {
	switch x := v.(type) {
	case *types.AttributeValueMemberL:
		l := make([]types.AttributeValue, len(x.Value))
		for i, e := range x.Value {
			l[i] = cloneValue(e)
		}
		return &types.AttributeValueMemberL{Value: l}
	case *types.AttributeValueMemberM:
		return &types.AttributeValueMemberM{Value: clone(x.Value)}
	case *types.AttributeValueMemberSS:
		return &types.AttributeValueMemberSS{Value: slices.Clone(x.Value)}
	}
	return v // immutable scalars
}

// project keeps of it the top-level attributes a projection expression
// names.
func project(it item, expr string, names map[string]string) item {
	if expr == "" || it == nil {
		return it
	}
	out := item{}
	for _, ref := range strings.Split(expr, ",") {
		ref = strings.TrimSpace(ref)
		if n, ok := names[ref]; ok {
			ref = n
		}
		if v, ok := it[ref]; ok {
			out[ref] = v
		}
	}
	return out
}
