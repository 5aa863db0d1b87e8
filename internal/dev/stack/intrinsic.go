package stack

import (
	"fmt"
	"strconv"
	"strings"
)

// binary returns the intrinsic function name if it takes two arguments
// (given as the template writes them), else nil.
func binary(name string) func(s *Stack, a, b any) (any, error) {
	switch name {
	case "Fn::GetAtt":
		return (*Stack).getAtt
	case "Fn::Join":
		return (*Stack).join
	case "Fn::Select":
		return (*Stack).selectOf
	case "Fn::Split":
		return (*Stack).split
	}
	return nil
}

func (s *Stack) intrinsic(name string, arg any) (any, error) {
	if f := binary(name); f != nil {
		parts, _ := arg.([]any)
		if len(parts) != 2 {
			return nil, fmt.Errorf("stack: %s of %v", name, arg)
		}
		return f(s, parts[0], parts[1])
	}
	switch name {
	case "Ref":
		id, ok := arg.(string)
		if !ok {
			return nil, fmt.Errorf("stack: Ref of %v", arg)
		}
		return s.ref(id)
	case "Condition":
		return s.condition(str(arg))
	case "Fn::Sub":
		return s.sub(arg)
	case "Fn::If":
		parts, _ := arg.([]any)
		if len(parts) != 3 {
			return nil, fmt.Errorf("stack: Fn::If of %v", arg)
		}
		ok, err := s.condition(str(parts[0]))
		if err != nil {
			return nil, err
		}
		if ok {
			return s.resolve(parts[1])
		}
		return s.resolve(parts[2])
	}
	return nil, fmt.Errorf("stack: intrinsic %s is not supported", name)
}

// getAtt is Fn::GetAtt [id, attr].
func (s *Stack) getAtt(id, attr any) (any, error) {
	a, err := s.ResolveString(attr)
	if err != nil {
		return nil, err
	}
	return s.GetAtt(str(id), a)
}

// join is Fn::Join [separator, list].
func (s *Stack) join(sep, list any) (any, error) {
	l, err := s.resolveList(list)
	if err != nil {
		return nil, err
	}
	return strings.Join(l, str(sep)), nil
}

// selectOf is Fn::Select [index, list].
func (s *Stack) selectOf(index, list any) (any, error) {
	idx, err := s.ResolveString(index)
	if err != nil {
		return nil, err
	}
	i, err := strconv.Atoi(idx)
	if err != nil {
		return nil, fmt.Errorf("stack: Fn::Select index %q: %w", idx, err)
	}
	l, err := s.resolveList(list)
	if err != nil {
		return nil, err
	}
	if i < 0 || i >= len(l) {
		return nil, fmt.Errorf("stack: Fn::Select index %d out of %d", i, len(l))
	}
	return l[i], nil
}

// split is Fn::Split [separator, string].
func (s *Stack) split(sep, src any) (any, error) {
	v, err := s.ResolveString(src)
	if err != nil {
		return nil, err
	}
	var out []any
	for _, p := range strings.Split(v, str(sep)) {
		out = append(out, p)
	}
	return out, nil
}
